import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A TCP proxy on loopback in front of a server (Postgres in the tests) that
/// can stop forwarding without closing anything: what a frozen server, a
/// table lock seen from the wire, or a network path that drops packets looks
/// like to a client. Frozen, it still accepts connections and reads what
/// clients send (counted in ``bytesHeld``), but passes nothing on in either
/// direction until ``thaw()``, when the held bytes go on in order.
public final class FreezingTCPProxy: @unchecked Sendable {
    /// The port clients connect to (127.0.0.1).
    public let port: Int
    private let targetPort: Int
    private let listener: Int32
    private struct State {
        var frozen: Bool
        var stopped = false
        var sockets: [Int32] = []
        /// Bytes read while frozen and not yet passed on.
        var held = 0
        var accepted = 0
    }
    private let state: Mutex<State>
    private let condition = NSCondition()

    /// Listens on an ephemeral loopback port; frozen from the start when `frozen`.
    public init(targetPort: Int, frozen: Bool = false) throws {
        self.targetPort = targetPort
        state = Mutex(State(frozen: frozen))
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard listener >= 0 else { throw ProxyError("socket: \(errno)") }
        var address = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 64) == 0 else { close(listener); throw ProxyError("bind/listen: \(errno)") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        self.listener = listener
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    /// Stops passing bytes on, both ways; connections stay open.
    public func freeze() {
        condition.lock()
        state.withLock { $0.frozen = true }
        condition.unlock()
    }

    /// Passes on what was held, and everything after it.
    public func thaw() {
        condition.lock()
        state.withLock { $0.frozen = false }
        condition.broadcast()
        condition.unlock()
    }

    /// Bytes read from either side while frozen, not yet passed on: a client
    /// that has sent its statement to a frozen server shows here.
    public var bytesHeld: Int { state.withLock { $0.held } }

    /// Connections accepted so far.
    public var accepted: Int { state.withLock { $0.accepted } }

    /// Closes the listener and every connection.
    public func stop() {
        condition.lock()
        let sockets = state.withLock { state in
            state.stopped = true
            return state.sockets
        }
        condition.broadcast()
        condition.unlock()
        for socket in sockets { shutdown(socket, Int32(SHUT_RDWR)) }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    deinit { stop() }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                return
            }
            let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = Self.loopback(port: targetPort)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            let stopped = state.withLock { state in
                state.accepted += 1
                state.sockets += [client, server]
                return state.stopped
            }
            guard connected == 0, !stopped else {
                shutdown(client, Int32(SHUT_RDWR))
                shutdown(server, Int32(SHUT_RDWR))
                continue
            }
            Thread.detachNewThread { [self] in pump(from: client, to: server) }
            Thread.detachNewThread { [self] in pump(from: server, to: client) }
        }
    }

    /// Copies `from` to `to` until either ends, holding what it read while frozen.
    private func pump(from source: Int32, to destination: Int32) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else {
                // A frozen server does not see its client leave either: pass the end on once thawed.
                condition.lock()
                while state.withLock({ $0.frozen && !$0.stopped }) { condition.wait() }
                condition.unlock()
                break
            }
            condition.lock()
            var counted = false
            while true {
                let (frozen, stopped) = state.withLock { ($0.frozen, $0.stopped) }
                if stopped { condition.unlock(); return }
                guard frozen else { break }
                if !counted { state.withLock { $0.held += count }; counted = true }
                condition.wait()
            }
            if counted { state.withLock { $0.held -= count } }
            condition.unlock()
            var offset = 0
            while offset < count {
                // MSG_NOSIGNAL: a peer that closed must not SIGPIPE the test process.
                let written = buffer.withUnsafeBytes { send(destination, $0.baseAddress! + offset, count - offset, Int32(MSG_NOSIGNAL)) }
                if written < 0, errno == EINTR { continue }
                guard written > 0 else { return }
                offset += written
            }
        }
        // One side ended: end the other, as a peer that closes would.
        shutdown(destination, Int32(SHUT_RDWR))
        shutdown(source, Int32(SHUT_RDWR))
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr = in_addr(s_addr: inet_addr("127.0.0.1"))
        return address
    }

    struct ProxyError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}
