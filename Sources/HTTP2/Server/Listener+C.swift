import Foundation
import RelayBasics
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The accept loop of an ``HTTP2Server``.
final class Listener: @unchecked Sendable {
    // `fd` and `context` are set in init and never change; `connections` and
    // `stopped` are guarded by `state`.
    let fd: Int32
    let port: Int
    /// nil: cleartext HTTP/2 with prior knowledge.
    let context: TLSContext?
    let configuration: HTTP2Server.Configuration
    let handler: HTTP2ServerHandler
    let wake = WakeSignal()
    /// The thread serving every established connection.
    let loop = ServerLoop()
    let accepted = Atomic<Int>(0)
    private let state = Mutex<(stopped: Bool, connections: [ServerConnection])>((false, []))
    /// Connections refused at accept, by why (a cap, per address or in all,
    /// no descriptor or thread to serve them with, the stop). Refusals are
    /// rare: a lock is cheap enough.
    private let refusals = Mutex<[HTTP2Server.Refusal: Int]>([:])
    /// Connections whose set-up thread runs now (``HTTP2Server/Configuration/maxConnectionsSettingUp``);
    /// a class, so that a set-up thread outliving the listener still holds it.
    let settingUp = SetUpCount()

    final class SetUpCount: Sendable {
        let value = Atomic<Int>(0)
    }

    init(configuration: HTTP2Server.Configuration, handler: @escaping HTTP2ServerHandler) throws(HTTP2Error) {
        self.configuration = configuration
        self.handler = handler
        Socket.ignoreBrokenPipes
        if let problem = wake.failure ?? loop.wake.failure {
            throw HTTP2Error(.connectFailed, "eventfd: \(problem)")
        }
        context = try configuration.tls.map { tls throws(HTTP2Error) in try TLSContext(server: tls) }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HTTP2Error(.connectFailed, "socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(configuration.port).bigEndian
        inet_pton(AF_INET, configuration.host, &address.sin_addr)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 512) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw HTTP2Error(.connectFailed, "cannot listen on \(configuration.host):\(configuration.port): \(reason)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        self.fd = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        Socket.setNonBlocking(fd)
        do {
            try DetachedThread.start(name: "relay-h2accept") { [self] in acceptLoop() }
        } catch {
            close(fd)
            throw HTTP2Error(.connectFailed, "\(error) for the listener on \(configuration.host):\(port)")
        }
    }

    private func acceptLoop() {
        // Out of descriptors: rest, not spin (AcceptRest).
        var rest = AcceptRest()
        while true {
            // Read once: a rest ending between two reads would leave the
            // listening socket out of a poll that sleeps the full second.
            let resting = rest.isResting
            var descriptors = [
                pollfd(fd: resting ? -1 : fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wake.fd, events: Int16(POLLIN), revents: 0),
            ]
            _ = poll(&descriptors, 2, resting ? AcceptRest.milliseconds : 1000)
            if state.withLock({ $0.stopped }) { break }
            guard descriptors[0].revents & Int16(POLLIN) != 0 else { continue }
            while true {
                if let bound = configuration.maxConnectionsSettingUp, settingUp.value.load(ordering: .relaxed) >= bound {
                    // As many set-ups as threads allowed for them: the next
                    // connections wait in the backlog until one is done.
                    rest.begin()
                    break
                }
                var peer = sockaddr_in()
                var peerLength = socklen_t(MemoryLayout<sockaddr_in>.size)
                let client = withUnsafeMutablePointer(to: &peer) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { accept(fd, $0, &peerLength) }
                }
                guard client >= 0 else {
                    rest.acceptFailed(errno)
                    break
                }
                Socket.setNonBlocking(client)
                var one: Int32 = 1
                setsockopt(client, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                let id = accepted.wrappingAdd(1, ordering: .relaxed).newValue
                let connection = ServerConnection(socket: client, id: id, listener: self, peerAddress: peer.sin_addr.s_addr)
                if connection.handOff.setUpWake.failure != nil {
                    // Accepted with the last descriptor: no eventfd to serve it with.
                    // Closed at once (the client sees a reset or EOF and resends).
                    rest.begin()
                    refuse(.noDescriptor)
                    close(client)
                    break
                }
                let refusal = state.withLock { state -> HTTP2Server.Refusal? in
                    guard !state.stopped else { return .stopping }
                    state.connections.removeAll { $0.isFinished }
                    // The caps count open connections: a client that closes its own gets room again.
                    if let cap = configuration.maxConnections, state.connections.count >= cap { return .maxConnections }
                    if let cap = configuration.maxConnectionsPerAddress,
                       state.connections.lazy.filter({ $0.peerAddress == connection.peerAddress }).count >= cap
                    {
                        return .maxConnectionsPerAddress
                    }
                    state.connections.append(connection)
                    return nil
                }
                if let refusal {
                    refuse(refusal)
                    close(client)
                    continue
                }
                do {
                    try connection.start()
                } catch {
                    // Out of threads (a pids limit): closed at once, not
                    // kept open against the caps with nobody serving it. The
                    // loop rests, as out of descriptors: what waits in the
                    // backlog is taken once threads are free.
                    connection.finish()
                    refuse(.noThread)
                    rest.begin()
                    break
                }
            }
        }
        close(fd)
    }

    private func refuse(_ refusal: HTTP2Server.Refusal) {
        refusals.withLock { $0[refusal, default: 0] += 1 }
    }

    /// Connections refused since the start, by why.
    var refusedByReason: [HTTP2Server.Refusal: Int] { refusals.withLock { $0 } }

    var connectionsAnswering: Int {
        state.withLock { $0.connections.filter { !$0.isFinished && !$0.isLingering }.count }
    }

    func stop(grace: Double = 0) {
        let connections = state.withLock { state -> [ServerConnection] in
            guard !state.stopped else { return [] }
            state.stopped = true
            return state.connections
        }
        wake.signal()
        connections.forEach { $0.command(.shutdown(grace: grace)) }
    }
}
