import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Exact bytes over a TCP socket: what curl would refuse to send (two
/// Content-Length headers, a space before a colon) or send too politely
/// (one header line every few seconds).
enum RawHTTP {
    struct Answer: Sendable {
        var status: Int
        /// Lowercased names; the last value of a repeated header.
        var headers: [String: String]
        var body: String
        /// Whether the server closed the connection after answering.
        var closed: Bool
    }

    /// A connected socket from `source` (any 127.x address) to 127.0.0.1:`port`, or -1;
    /// with `timeoutMilliseconds`, connect (and later sends) wait at most that long.
    static func connect(port: UInt16, source: String = "127.0.0.1", timeoutMilliseconds: Int? = nil) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return -1 }
        if let timeoutMilliseconds {
            var limit = timeval(tv_sec: timeoutMilliseconds / 1000, tv_usec: Int((timeoutMilliseconds % 1000) * 1000))
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        }
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        inet_pton(AF_INET, source, &local.sin_addr)
        var remote = sockaddr_in()
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_port = port.bigEndian
        inet_pton(AF_INET, "127.0.0.1", &remote.sin_addr)
        let size = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, size) } }
        let connected = withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, size) }
        }
        guard bound == 0, connected == 0 else {
            close(fd)
            return -1
        }
        return fd
    }

    /// Sends `bytes` whole; false when the peer is gone.
    @discardableResult
    static func send(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { return false }
            offset += sent
        }
        return true
    }

    /// Sends one request and reads one answer (to its Content-Length, or to
    /// the close), waiting at most `timeout` seconds for it. Runs on a
    /// thread of its own: the socket calls block.
    static func exchange(port: UInt16, _ request: String, timeout: Int = 10) async throws -> Answer {
        try await exchange(port: port, Array(request.utf8), timeout: timeout)
    }

    static func exchange(port: UInt16, _ request: [UInt8], timeout: Int = 10) async throws -> Answer {
        let raw = await offPool { () -> (bytes: [UInt8], closed: Bool)? in
            let fd = connect(port: port)
            guard fd >= 0 else { return nil }
            defer { close(fd) }
            var limit = timeval(tv_sec: timeout, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            send(fd, request)
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = recv(fd, &buffer, buffer.count, 0)
                if count == 0 { return (received, true) }
                if count < 0 { return errno == EAGAIN || errno == EWOULDBLOCK ? (received, false) : (received, true) }
                received += buffer[0..<count]
                if let complete = completeLength(received), received.count >= complete {
                    // A server that closes after answering does so at once.
                    var brief = timeval(tv_sec: 1, tv_usec: 0)
                    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &brief, socklen_t(MemoryLayout<timeval>.size))
                    let after = recv(fd, &buffer, buffer.count, 0)
                    return (received, after == 0 || (after < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
                }
            }
        }
        let answer = try #require(raw, "could not connect to 127.0.0.1:\(port)")
        try #require(!answer.bytes.isEmpty, "no answer within \(timeout) s (closed: \(answer.closed))")
        return try parse(answer.bytes, closed: answer.closed)
    }

    /// Head length plus Content-Length, once the head is in.
    private static func completeLength(_ bytes: [UInt8]) -> Int? {
        guard let end = headEnd(bytes) else { return nil }
        let head = String(decoding: bytes[..<end], as: UTF8.self).lowercased()
        let length = head.components(separatedBy: "\r\n").first { $0.hasPrefix("content-length:") }
            .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
        return end + 4 + length
    }

    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4) where bytes[index..<index + 4].elementsEqual([13, 10, 13, 10]) { return index }
        return nil
    }

    private static func parse(_ bytes: [UInt8], closed: Bool) throws -> Answer {
        let end = try #require(headEnd(bytes), "no complete head in \(String(decoding: bytes, as: UTF8.self))")
        let lines = String(decoding: bytes[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let status = lines[0].split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return Answer(status: status, headers: headers, body: String(decoding: bytes[(end + 4)...], as: UTF8.self), closed: closed)
    }
}

/// Runs blocking work on a thread of its own, never on the cooperative pool.
func offPool<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        let thread = Thread { continuation.resume(returning: work()) }
        thread.stackSize = 1 << 20
        thread.start()
    }
}
