import RelayBasics

#if canImport(Glibc)
    import Glibc
#endif

/// A minimal HTTP/1.1 client over one keep-alive TCP connection, blocking.
///
/// The demo and the ingress benchmark drive the relay with it from threads
/// they own (never Swift's cooperative pool). It speaks exactly what the
/// relay answers: Content-Length bodies, no chunking, no TLS.
final class BlockingHTTPClient {
    struct Response {
        var status: Int
        var body: [UInt8]
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    let host: String
    let port: UInt16
    private var descriptor: Int32 = -1
    private var buffer: [UInt8] = []
    /// Reused for every recv: a fresh 64 KB array per read cost a memset each time.
    private var chunk = [UInt8](repeating: 0, count: 65536)

    init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    deinit { if descriptor >= 0 { close(descriptor) } }

    private func connectIfNeeded() throws {
        guard descriptor < 0 else { return }
        descriptor = try Self.connect(host: host, port: port)
        buffer.removeAll(keepingCapacity: true)
    }

    /// A TCP connection to `host` (IPv4) and `port`, Nagle off. With
    /// `nonBlocking` the socket is non-blocking and the connection may still
    /// be in progress: its first write waits for it (EAGAIN until then), so a
    /// SYN the server's full backlog dropped (retried for up to about 30 s)
    /// stalls only this connection, not the thread that polls every other.
    static func connect(host: String, port: UInt16, nonBlocking: Bool = false) throws -> Int32 {
        let socketDescriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socketDescriptor >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
            close(socketDescriptor)
            throw Failure(description: "\(host) is not an IPv4 address")
        }
        var one: Int32 = 1
        setsockopt(socketDescriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        if nonBlocking { _ = fcntl(socketDescriptor, F_SETFL, fcntl(socketDescriptor, F_GETFL) | O_NONBLOCK) }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(socketDescriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 || (nonBlocking && errno == EINPROGRESS) else {
            let message = String(cString: strerror(errno))
            close(socketDescriptor)
            throw Failure(description: "connect to \(host):\(port): \(message)")
        }
        return socketDescriptor
    }

    /// Sends one request and reads its answer; reconnects once if the server
    /// closed the kept-alive connection in between.
    func request(_ method: String, _ path: String, headers: [HTTPHeader] = [], body: [UInt8] = []) throws -> Response {
        do {
            return try exchange(method, path, headers, body)
        } catch {
            reset()
            return try exchange(method, path, headers, body)
        }
    }

    private func reset() {
        if descriptor >= 0 { close(descriptor) }
        descriptor = -1
    }

    private func exchange(_ method: String, _ path: String, _ headers: [HTTPHeader], _ body: [UInt8]) throws -> Response {
        try connectIfNeeded()
        var head = "\(method) \(path) HTTP/1.1\r\nhost: \(host):\(port)\r\ncontent-length: \(body.count)\r\n"
        for header in headers { head += "\(header.name): \(header.value)\r\n" }
        head += "\r\n"
        try write(Array(head.utf8) + body)
        return try readResponse()
    }

    private func write(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { throw Failure(description: "send: \(String(cString: strerror(errno)))") }
            offset += written
        }
    }

    private func fill() throws {
        let descriptor = descriptor
        let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { throw Failure(description: count == 0 ? "connection closed" : "recv: \(String(cString: strerror(errno)))") }
        buffer.append(contentsOf: chunk[0..<count])
    }

    /// Reads one answer: its head through the load generator's parser
    /// (``HTTPAnswerHead``), then its Content-Length body.
    private func readResponse() throws -> Response {
        var searchedUpTo = 0
        var parsed: HTTPAnswerHead?
        while parsed == nil {
            do {
                parsed = try buffer.withUnsafeBufferPointer { try HTTPAnswerHead.parse($0, searchedUpTo: &searchedUpTo) }
            } catch {
                throw Failure(description: "\(error)")
            }
            if parsed == nil { try fill() }
        }
        let head = parsed!
        while buffer.count < head.length + head.contentLength { try fill() }
        let body = Array(buffer[head.length..<(head.length + head.contentLength)])
        buffer.removeFirst(head.length + head.contentLength)
        if head.closes { reset() }
        return Response(status: head.status, body: body)
    }
}
