import RelayBasics

/// The requests a server connection is receiving: header blocks and bodies
/// as nghttp2's callbacks deliver them, with the connection's limits
/// applied as they come (header list size: 431; body size: 413), until a
/// request ends and is handed on. Belongs to the connection's thread; no
/// I/O here, so it is tested without a socket (`IncomingRequestsTests`).
struct IncomingRequests {
    /// One request as it arrives.
    struct Request {
        var method = ""
        var path = ""
        var authority: String?
        var headers: [HTTPHeader] = []
        var body: [UInt8] = []
        /// Header bytes so far, as SETTINGS_MAX_HEADER_LIST_SIZE counts them.
        var headerBytes = 0
        /// A limit this request broke: the status to answer instead of handling it.
        var refusedWith: Int?
        /// When its first header came (MonotonicClock), for the request time limit.
        var began: UInt64 = 0
    }

    /// Requests whose frames did not arrive last, by stream.
    private var parked: [Int32: Request] = [:]
    /// The stream whose frames arrived last, kept out of `parked`: a
    /// request's header block comes in one piece and its body usually right
    /// after, so its dozen headers and its data go here without a dictionary
    /// lookup each. Parked when another stream's frames come.
    private var current: (stream: Int32, request: Request)?
    /// Past this many header bytes a request is answered 431 (nil: no limit).
    let maxHeaderListBytes: Int?
    /// Past this many body bytes a request is answered 413 (nil: no limit).
    let maxRequestBodyBytes: Int?

    /// Regular headers room is made for at a request's first: an APNs
    /// library's request has up to about ten (authorization and the apns-*
    /// headers), and the relay's ingress adds two.
    static let expectedHeaderCount = 16

    init(maxHeaderListBytes: Int?, maxRequestBodyBytes: Int?) {
        self.maxHeaderListBytes = maxHeaderListBytes
        self.maxRequestBodyBytes = maxRequestBodyBytes
    }

    /// No request is on its way.
    var isEmpty: Bool { current == nil && parked.isEmpty }

    /// A header block began on `stream` at `now`.
    mutating func began(_ stream: Int32, at now: UInt64) {
        if let previous = current, previous.stream != stream { parked[previous.stream] = previous.request }
        parked[stream] = nil
        current = (stream, Request(began: now))
    }

    /// One header of `stream`'s block.
    mutating func header(_ stream: Int32, name: String, value: String) {
        guard select(stream) else { return }
        if let limit = maxHeaderListBytes {
            current!.request.headerBytes += name.utf8.count + value.utf8.count + 32
            if current!.request.headerBytes > limit { current!.request.refusedWith = 431 }
        }
        guard current!.request.refusedWith == nil else { return }
        // Regular headers (most of a request's) by their first byte: no
        // string comparison with each pseudo-header name for each of them.
        guard name.utf8.first == UInt8(ascii: ":") else {
            // Room for an APNs request's headers at the first one: growing
            // the array one header at a time reallocated it four times per request.
            if current!.request.headers.capacity == 0 { current!.request.headers.reserveCapacity(Self.expectedHeaderCount) }
            current!.request.headers.append(HTTPHeader(name, value))
            return
        }
        switch name {
        case ":method": current!.request.method = value
        case ":path": current!.request.path = value
        case ":authority": current!.request.authority = value
        default: break
        }
    }

    /// Body bytes of `stream`. Past the body limit the rest is dropped as it
    /// comes; the request is answered 413 when it ends.
    mutating func data(_ stream: Int32, bytes: UnsafeRawBufferPointer) {
        guard select(stream), current!.request.refusedWith == nil else { return }
        if let limit = maxRequestBodyBytes, current!.request.body.count + bytes.count > limit {
            current!.request.refusedWith = 413
            current!.request.body = []
            return
        }
        current!.request.body.append(contentsOf: bytes)
    }

    /// `stream`'s request is complete: taken out and returned (nil when it
    /// never began, or was reset). The peer sends nothing more on an ended
    /// stream (nghttp2 rejects it), so the request leaves here rather than
    /// when the stream closes.
    mutating func end(_ stream: Int32) -> Request? {
        guard select(stream), let request = current?.request else { return nil }
        current = nil
        return request
    }

    /// `stream` closed (or was reset): its request, if still arriving, is dropped.
    mutating func close(_ stream: Int32) {
        if current?.stream == stream { current = nil }
        if !parked.isEmpty { parked[stream] = nil }
    }

    /// Drops every request that began before `oldest` and is still
    /// incomplete, handing its stream to `reset`: a client trickling a body
    /// holds a stream (and its share of the concurrent streams) no longer
    /// than the request time limit.
    mutating func removeBegun(before oldest: UInt64, _ reset: (Int32) -> Void) {
        if let previous = current, previous.request.began < oldest {
            current = nil
            reset(previous.stream)
        }
        for (stream, request) in parked where request.began < oldest {
            parked[stream] = nil
            reset(stream)
        }
    }

    /// Makes `stream` the current one: the current one is parked and
    /// `stream` taken out of `parked`. False when `stream` has no request
    /// (it never began, or it ended).
    private mutating func select(_ stream: Int32) -> Bool {
        if current?.stream == stream { return true }
        if let previous = current { parked[previous.stream] = previous.request }
        current = parked.removeValue(forKey: stream).map { (stream, $0) }
        return current != nil
    }
}
