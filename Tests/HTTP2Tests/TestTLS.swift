import Foundation
import TestSupport
import Testing

/// A throwaway CA-less self-signed certificate for 127.0.0.1 and localhost,
/// made by the `openssl` command line.
struct TestCertificate {
    let directory: String
    var certificate: String { directory + "/cert.pem" }
    var key: String { directory + "/key.pem" }

    init(names: String = "DNS:localhost,IP:127.0.0.1") throws {
        directory = NSTemporaryDirectory() + "apns-relay-tls-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try Command.run([
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", directory + "/key.pem", "-out", directory + "/cert.pem", "-days", "2", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=\(names)",
        ])
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }
}

/// Runs commands and background servers for tests.
enum Command {
    @discardableResult
    static func run(_ arguments: [String]) throws -> String {
        let (status, text) = try ProcessRunner.run(arguments)
        try #require(status == 0, "\(arguments.joined(separator: " ")) failed: \(text)")
        return text
    }

    /// Starts a long-running server process; the caller kills it.
    static func start(_ arguments: [String]) throws -> ChildProcess {
        try ChildProcess(arguments)
    }

    /// A free loopback port (bound and released).
    static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Waits until something accepts TCP connections on the port (the
    /// server's readiness event), for at most `timeout` seconds.
    static func waitUntilListening(port: Int, timeout: Double = 30) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(port).bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let result = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            close(fd)
            if result == 0 { return }
            usleep(20_000)
        }
        Issue.record("nothing listened on port \(port) within \(timeout) s")
        throw CancellationError()
    }
}

/// A loopback TCP port that completes connections (the kernel's backlog) but
/// never reads or writes: a TLS handshake against it hangs.
struct SilentTCPListener {
    let fd: Int32
    let port: Int

    init() throws {
        (fd, port) = try loopbackSocket(listening: true)
    }

    func close() { _ = Glibc.close(fd) }
}

/// A loopback port bound but not listening: every connection to it is
/// refused. A port `Command.freePort()` found free can be taken meanwhile by
/// another test's server (the suites run in parallel); this one cannot while
/// it is held.
struct RefusingPort {
    let fd: Int32
    let port: Int

    init() throws {
        (fd, port) = try loopbackSocket(listening: false)
    }

    func close() { _ = Glibc.close(fd) }
}

/// A TCP socket bound to a free loopback port (port 0, the kernel picks),
/// listening with a backlog of 8 when `listening`; its descriptor and port.
private func loopbackSocket(listening: Bool) throws -> (fd: Int32, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    try #require(bound == 0 && (!listening || listen(fd, 8) == 0),
                 "cannot \(listening ? "listen" : "bind"): \(String(cString: strerror(errno)))")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}
