internal import CNGHTTP2
import RelayBasics

#if canImport(Glibc)
    import Glibc
#endif

/// What a session reports from the frames it receives.
protocol NGHTTP2SessionDelegate: AnyObject {
    func sessionBeganHeaders(stream: Int32)
    func sessionReceivedHeader(stream: Int32, name: String, value: String)
    /// The peer ended its side of `stream` (END_STREAM on HEADERS or DATA).
    func sessionStreamEnded(stream: Int32)
    func sessionReceivedData(stream: Int32, bytes: UnsafeRawBufferPointer)
    func sessionStreamClosed(stream: Int32, errorCode: UInt32)
    func sessionReceivedGoAway(lastStream: Int32, errorCode: UInt32)
    func sessionReceivedPingAck()
    /// The peer reset `stream` with RST_STREAM.
    func sessionReceivedReset(stream: Int32, errorCode: UInt32)
    /// The peer's SETTINGS (not an ACK) arrived: its limits are now known.
    func sessionReceivedSettings()
    /// This side ended its half of `stream`: the frame carrying END_STREAM
    /// (HEADERS or the last DATA) was handed out for the wire. Reported to
    /// client sessions only (a server's callback would cost every answer a
    /// call for nothing).
    func sessionSentStreamEnd(stream: Int32)
}

extension NGHTTP2SessionDelegate {
    func sessionSentStreamEnd(stream: Int32) {}
}

/// Owns an nghttp2_session driven by memory buffers (our thread does the I/O).
final class NGHTTP2Session {
    private var session: OpaquePointer?
    /// Unowned and unchecked, not weak: a weak load per callback (a dozen
    /// per request: one per header) cost the mock APNs 2% of its CPU. Safe
    /// because the delegate owns this session (ServerConnection and
    /// ClientSession keep it in a property) and callbacks run only inside
    /// `receive` and `collectOutput`, which the delegate calls.
    private unowned(unsafe) let delegate: any NGHTTP2SessionDelegate
    /// Outgoing bodies by stream, with how much has been sent.
    fileprivate var bodies: [Int32: (bytes: [UInt8], offset: Int)] = [:]

    static let refusedStream = NGHTTP2_REFUSED_STREAM.rawValue
    static let noError = NGHTTP2_NO_ERROR.rawValue
    static let cancel = NGHTTP2_CANCEL.rawValue

    init(client: Bool, delegate: any NGHTTP2SessionDelegate, maxConcurrentStreams: UInt32?, maxHeaderListSize: UInt32? = nil) throws(HTTP2Error) {
        self.delegate = delegate
        var callbacks: OpaquePointer?
        guard nghttp2_session_callbacks_new(&callbacks) == 0 else { throw HTTP2Error(.proto, "nghttp2 callbacks") }
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, onBeginHeaders)
        nghttp2_session_callbacks_set_on_header_callback(callbacks, onHeader)
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, onFrameReceived)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, onDataChunk)
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, onStreamClose)
        if client { nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, onFrameSent) }
        let context = Unmanaged.passUnretained(self).toOpaque()
        var session: OpaquePointer?
        let status = client
            ? nghttp2_session_client_new(&session, callbacks, context)
            : nghttp2_session_server_new(&session, callbacks, context)
        guard status == 0, let session else { throw HTTP2Error(.proto, "nghttp2 session: \(status)") }
        self.session = session

        var settings = [nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0)]
        if let maxConcurrentStreams {
            settings.append(nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: maxConcurrentStreams))
        }
        if let maxHeaderListSize {
            settings.append(nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue), value: maxHeaderListSize))
        }
        if !client { settings.removeFirst() }  // ENABLE_PUSH is a client setting
        _ = nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
    }

    deinit { nghttp2_session_del(session) }

    /// Feeds received bytes; throws when the peer broke the protocol.
    func receive(_ buffer: [UInt8], count: Int) throws(HTTP2Error) {
        let consumed = buffer.withUnsafeBufferPointer { nghttp2_session_mem_recv(session, $0.baseAddress, count) }
        if consumed < 0 { throw HTTP2Error(.proto, String(cString: nghttp2_strerror(Int32(consumed)))) }
    }

    /// Everything nghttp2 wants to send now, appended to `output`.
    func collectOutput(into output: inout [UInt8]) throws(HTTP2Error) {
        while true {
            var data: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(session, &data)
            if count < 0 { throw HTTP2Error(.proto, String(cString: nghttp2_strerror(Int32(count)))) }
            guard count > 0, let data else { return }
            output.append(contentsOf: UnsafeBufferPointer(start: data, count: count))
        }
    }

    var wantsRead: Bool { nghttp2_session_want_read(session) != 0 }
    var wantsWrite: Bool { nghttp2_session_want_write(session) != 0 }

    /// The peer's SETTINGS_MAX_CONCURRENT_STREAMS (unlimited until it says).
    var remoteMaxConcurrentStreams: UInt32 {
        nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)
    }

    /// Submits a request; returns its stream id.
    func submitRequest(headers: [HTTPHeader], body: [UInt8]) throws(HTTP2Error) -> Int32 {
        let stream = withHeaderBlock(headers) { nva, count in
            body.isEmpty
                ? nghttp2_submit_request(session, nil, nva, count, nil, nil)
                : withDataProvider { provider in nghttp2_submit_request(session, nil, nva, count, provider, nil) }
        }
        guard stream > 0 else { throw HTTP2Error(.proto, "cannot submit request: \(String(cString: nghttp2_strerror(stream)))") }
        if !body.isEmpty { bodies[stream] = (body, 0) }
        return stream
    }

    /// Submits a response on `stream`: `:status` first, then `headers`.
    /// The status goes into the header block directly: prepending it to
    /// `headers` built a new array (and retained every header) per answer.
    func submitResponse(stream: Int32, status: Int, headers: [HTTPHeader], body: [UInt8]) {
        let status = withHeaderBlock(headers, status: status) { nva, count in
            body.isEmpty
                ? nghttp2_submit_response(session, stream, nva, count, nil)
                : withDataProvider { provider in nghttp2_submit_response(session, stream, nva, count, provider) }
        }
        if status == 0, !body.isEmpty { bodies[stream] = (body, 0) }
    }

    func submitReset(stream: Int32, errorCode: UInt32) {
        _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream, errorCode)
    }

    func submitGoAway(lastStream: Int32, errorCode: UInt32 = 0) {
        _ = nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), lastStream, errorCode, nil, 0)
    }

    /// Sends a new SETTINGS_MAX_CONCURRENT_STREAMS mid-connection (a server
    /// lowering or raising its limit, as APNs does after a rejected push).
    func submitMaxConcurrentStreams(_ value: UInt32) {
        var settings = [nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: value)]
        _ = nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
    }

    func submitPing() {
        _ = nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil)
    }

    /// The highest stream id the peer opened (servers use it for GOAWAY).
    var lastProcessedPeerStream: Int32 { nghttp2_session_get_last_proc_stream_id(session) }

    /// The header block as nghttp2 takes it: every name and value copied
    /// once into one buffer (nghttp2 copies them again on submit), not a
    /// strdup and a free per string. `status`, if given, comes first as
    /// `:status` (a response's).
    private func withHeaderBlock(_ headers: [HTTPHeader], status: Int? = nil, _ body: (UnsafePointer<nghttp2_nv>, Int) -> Int32) -> Int32 {
        // ":status" and up to three digits (nghttp2 takes 100-999 only).
        let statusText: (name: StaticString, digits: (UInt8, UInt8, UInt8))? = status.map { status in
            let status = max(0, min(status, 999))
            return (":status", (UInt8(48 + status / 100), UInt8(48 + status / 10 % 10), UInt8(48 + status % 10)))
        }
        let count = headers.count + (statusText == nil ? 0 : 1)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(headers.reduce(1 + (statusText == nil ? 0 : 10)) { $0 + $1.name.utf8.count + $1.value.utf8.count })
        if let statusText {
            bytes.append(contentsOf: UnsafeBufferPointer(start: statusText.name.utf8Start, count: statusText.name.utf8CodeUnitCount))
            bytes.append(statusText.digits.0)
            bytes.append(statusText.digits.1)
            bytes.append(statusText.digits.2)
        }
        for header in headers {
            bytes.append(contentsOf: header.name.utf8)
            bytes.append(contentsOf: header.value.utf8)
        }
        bytes.append(0)  // never empty, so the buffer has an address
        return bytes.withUnsafeMutableBufferPointer { buffer in
            withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: max(1, count)) { nva in
                var offset = 0
                var index = 0
                if statusText != nil {
                    nva.initializeElement(at: 0, to: nghttp2_nv(
                        name: buffer.baseAddress!, value: buffer.baseAddress! + 7, namelen: 7, valuelen: 3,
                        flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)))
                    offset = 10
                    index = 1
                }
                for header in headers {
                    let name = buffer.baseAddress! + offset
                    offset += header.name.utf8.count
                    let value = buffer.baseAddress! + offset
                    offset += header.value.utf8.count
                    nva.initializeElement(at: index, to: nghttp2_nv(
                        name: name, value: value, namelen: header.name.utf8.count, valuelen: header.value.utf8.count,
                        flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)))
                    index += 1
                }
                return body(UnsafePointer(nva.baseAddress!), count)
            }
        }
    }

    private func withDataProvider(_ body: (UnsafePointer<nghttp2_data_provider>) -> Int32) -> Int32 {
        var provider = nghttp2_data_provider()
        provider.read_callback = readBody
        return body(&provider)
    }

    fileprivate static func from(_ context: UnsafeMutableRawPointer?) -> NGHTTP2Session {
        Unmanaged<NGHTTP2Session>.fromOpaque(context!).takeUnretainedValue()
    }

    fileprivate var reporter: (any NGHTTP2SessionDelegate)? { delegate }
}

// MARK: nghttp2 callbacks (C convention, no captures)

private let readBody: nghttp2_data_source_read_callback = { _, stream, buffer, length, flags, _, context in
    let session = NGHTTP2Session.from(context)
    guard let entry = session.bodies[stream], let buffer, let flags else {
        flags?.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
        return 0
    }
    let count = min(length, entry.bytes.count - entry.offset)
    entry.bytes.withUnsafeBufferPointer { source in
        buffer.update(from: source.baseAddress! + entry.offset, count: count)
    }
    if entry.offset + count == entry.bytes.count {
        flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
        session.bodies[stream] = nil
    } else {
        session.bodies[stream] = (entry.bytes, entry.offset + count)
    }
    return count
}

private let onBeginHeaders: nghttp2_on_begin_headers_callback = { _, frame, context in
    guard let frame else { return 0 }
    NGHTTP2Session.from(context).reporter?.sessionBeganHeaders(stream: frame.pointee.hd.stream_id)
    return 0
}

private let onHeader: nghttp2_on_header_callback = { _, frame, name, nameLength, value, valueLength, _, context in
    guard let frame, let name, let value else { return 0 }
    let nameText = String(decoding: UnsafeBufferPointer(start: name, count: nameLength), as: UTF8.self)
    let valueText = String(decoding: UnsafeBufferPointer(start: value, count: valueLength), as: UTF8.self)
    NGHTTP2Session.from(context).reporter?.sessionReceivedHeader(stream: frame.pointee.hd.stream_id, name: nameText, value: valueText)
    return 0
}

private let onFrameReceived: nghttp2_on_frame_recv_callback = { _, frame, context in
    guard let frame else { return 0 }
    let session = NGHTTP2Session.from(context)
    let header = frame.pointee.hd
    let endStream = header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
    switch UInt32(header.type) {
    case NGHTTP2_HEADERS.rawValue, NGHTTP2_DATA.rawValue:
        if endStream { session.reporter?.sessionStreamEnded(stream: header.stream_id) }
    case NGHTTP2_GOAWAY.rawValue:
        session.reporter?.sessionReceivedGoAway(lastStream: frame.pointee.goaway.last_stream_id, errorCode: frame.pointee.goaway.error_code)
    case NGHTTP2_SETTINGS.rawValue:
        if header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0 { session.reporter?.sessionReceivedSettings() }
    case NGHTTP2_RST_STREAM.rawValue:
        session.reporter?.sessionReceivedReset(stream: header.stream_id, errorCode: frame.pointee.rst_stream.error_code)
    case NGHTTP2_PING.rawValue:
        if header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0 { session.reporter?.sessionReceivedPingAck() }
    default:
        break
    }
    return 0
}

/// A request's last frame handed out: from here on the server may act on
/// it, answered or not (the retry rule for a send that must go out at most
/// once reads this).
private let onFrameSent: nghttp2_on_frame_send_callback = { _, frame, context in
    guard let frame else { return 0 }
    let header = frame.pointee.hd
    guard header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0 else { return 0 }
    switch UInt32(header.type) {
    case NGHTTP2_HEADERS.rawValue, NGHTTP2_DATA.rawValue:
        NGHTTP2Session.from(context).reporter?.sessionSentStreamEnd(stream: header.stream_id)
    default:
        break
    }
    return 0
}

private let onDataChunk: nghttp2_on_data_chunk_recv_callback = { _, _, stream, data, length, context in
    guard let data else { return 0 }
    NGHTTP2Session.from(context).reporter?.sessionReceivedData(stream: stream, bytes: UnsafeRawBufferPointer(start: data, count: length))
    return 0
}

private let onStreamClose: nghttp2_on_stream_close_callback = { _, stream, errorCode, context in
    let session = NGHTTP2Session.from(context)
    session.bodies[stream] = nil
    session.reporter?.sessionStreamClosed(stream: stream, errorCode: errorCode)
    return 0
}
