import RelayBasics

/// A server connection's socket and TLS stream with their buffers, on the
/// thread serving it: the TLS handshake, the session's output written as
/// far as the socket takes it, what arrives read into the session, and the
/// lingering close after the last frame.
///
/// A class, not a struct kept in ``ServerConnection``, as the client's
/// `ConnectionIO`: the loop reads it around every poll().
final class ServerConnectionIO {
    /// -1 once closed or reset.
    private(set) var socket: Int32
    private var tls: TLSStream?
    /// The client's verified certificate, set by the handshake before any request is read.
    private(set) var clientCertificate: ClientCertificate?
    private var output: [UInt8] = []
    /// Reads land here; kept from one turn to the next.
    private var buffer = [UInt8](repeating: 0, count: 16_384)
    /// Set once the goodbye is written: the connection drains its peer's
    /// bytes until it closes, or until this (MonotonicClock) passes.
    private(set) var lingerDeadline: UInt64?

    /// How long a closing connection waits for its peer to close.
    static let lingerSeconds = 2.0

    init(socket: Int32) {
        self.socket = socket
    }

    /// Bytes OpenSSL already decrypted never show up in poll(): the loop reads them without sleeping.
    var hasBufferedInput: Bool { lingerDeadline == nil && tls?.hasPendingBytes == true }

    /// Output the socket did not take yet: the loop polls for writability.
    var hasOutputLeft: Bool { !output.isEmpty }

    /// The TLS handshake (none on a cleartext listener, where the client's
    /// connection preface is HTTP/2's first bytes), 10 s at most, waking
    /// early on `wake`. False unless it completed and the client chose h2.
    func handshake(context: TLSContext?, wake: WakeSignal) -> Bool {
        guard let context else { return true }
        guard let stream = try? TLSStream(context: context, socket: socket, client: false, serverName: nil) else { return false }
        tls = stream
        let deadline = MonotonicClock.now() + 10_000_000_000
        while MonotonicClock.now() < deadline {
            guard let progress = try? stream.handshake() else { return false }
            if case .done = progress {
                clientCertificate = stream.peerCertificate()
                return stream.negotiatedProtocol == "h2"
            }
            _ = Poll.wait(socket: socket, read: progress == .wantRead, write: progress == .wantWrite, wake: wake, milliseconds: 1000)
        }
        return false
    }

    /// Collects what `session` has to send and writes as much as the socket
    /// takes; false when the session or the socket failed.
    func flush(_ session: NGHTTP2Session) -> Bool {
        guard (try? session.collectOutput(into: &output)) != nil else { return false }
        while !output.isEmpty {
            switch output.withUnsafeBytes({ bytes in tls.map { $0.write(bytes) } ?? Socket.write(socket, bytes) }) {
            case .bytes(let count): output.removeFirst(count)
            case .wouldBlock: return true
            case .closed, .failed: return false
            }
        }
        return true
    }

    /// Reads what poll() reported (or OpenSSL holds) into `session`, whose
    /// callbacks run here; false when the connection is done.
    func read(_ readiness: Poll.Readiness, into session: NGHTTP2Session) -> Bool {
        // Bytes OpenSSL already decrypted never show up in poll(): read them now.
        guard readiness.shouldRead || tls?.hasPendingBytes == true else { return true }
        while true {
            switch buffer.withUnsafeMutableBytes({ read(into: $0) }) {
            case .bytes(let count):
                guard (try? session.receive(buffer, count: count)) != nil else { return false }
                // Nothing left inside OpenSSL: the socket's next bytes
                // show in poll(), without a read that only says EAGAIN.
                if tls?.hasPendingBytes != true { return true }
            case .wouldBlock: return true
            case .closed, .failed: return false
            }
        }
    }

    /// The last frame (GOAWAY) is written: sends close_notify and a FIN,
    /// then reads and drops whatever the peer still sends until it closes,
    /// for at most ``lingerSeconds``. Closing at once with the peer's
    /// requests unread would send an RST, and a peer's kernel that takes
    /// the RST first drops the GOAWAY unread: the client would see a reset
    /// connection instead of which streams were never processed.
    func beginLingering(now: UInt64) {
        tls?.shutdown()
        Socket.shutdownWrite(socket)
        lingerDeadline = now + UInt64(Self.lingerSeconds * 1e9)
    }

    /// Reads and drops what a lingering connection's peer sent; false once it closed.
    func drainWhileLingering() -> Bool {
        while true {
            switch buffer.withUnsafeMutableBytes({ read(into: $0) }) {
            case .bytes: continue
            case .wouldBlock: return true
            case .closed, .failed: return false
            }
        }
    }

    /// Resets the TCP connection (an RST, for the mock's fault injection).
    func reset() {
        Socket.reset(socket)
        socket = -1
    }

    /// Closes the socket unless it was reset.
    func close() {
        if socket >= 0 { Socket.close(socket) }
        socket = -1
    }

    /// Reads through TLS, or from the socket itself on a cleartext listener.
    private func read(into buffer: UnsafeMutableRawBufferPointer) -> TLSStream.IOResult {
        if let tls { return tls.read(into: buffer) }
        return Socket.read(socket, into: buffer)
    }
}
