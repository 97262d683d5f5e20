import RelayBasics

/// A client connection's socket and TLS stream with their buffers, on the
/// connection's thread: writes what the session has to send (keeping what
/// the socket would not take for the next turn) and feeds the session what
/// arrives, noting when bytes last came for the keep-alive.
///
/// A class, not a struct kept in `ConnectionCore`: the loop reads it around
/// every poll() (`socket`, `hasOutputLeft`, `hasBufferedInput`), and a struct
/// in a class property was copied out for those reads, a retain and a
/// release of each of its buffers per turn.
final class ConnectionIO {
    /// `host:port`, for the errors' messages.
    let origin: String
    /// Set while the connection sets up (`ConnectionCore.establish`); -1 when none.
    var socket: Int32 = -1
    var tls: TLSStream?
    private var output: [UInt8] = []
    private var outputOffset = 0
    /// Where TLS records are decrypted into, kept: a fresh 16 KiB buffer per read was a malloc and a memset each wake-up.
    private var readBuffer = [UInt8](repeating: 0, count: 16_384)
    /// Monotonic nanoseconds when bytes last came (or the connection came up).
    var lastActivity: UInt64 = 0

    init(origin: String) {
        self.origin = origin
    }

    /// Output left that the socket did not take: the loop waits for it to be writable.
    var hasOutputLeft: Bool { outputOffset < output.count }

    /// Bytes OpenSSL holds that poll() cannot see: the loop must not sleep.
    var hasBufferedInput: Bool { tls?.hasPendingBytes ?? false }

    /// Writes what `session` has to send, until the socket takes no more.
    func flush(_ session: NGHTTP2Session) throws(HTTP2Error) {
        if outputOffset >= output.count {
            output.removeAll(keepingCapacity: true)
            outputOffset = 0
        }
        try session.collectOutput(into: &output)
        guard let tls else { return }
        while outputOffset < output.count {
            let result = output.withUnsafeBytes { bytes in
                tls.write(UnsafeRawBufferPointer(rebasing: bytes[outputOffset...]))
            }
            switch result {
            case .bytes(let count): outputOffset += count
            case .wouldBlock: return
            case .closed: throw HTTP2Error(.connection, "\(origin) closed the connection")
            case .failed(let reason): throw HTTP2Error(.connection, "write to \(origin) failed: \(reason)")
            }
        }
    }

    /// Reads what has come, if poll() said so or OpenSSL holds some, into `session`.
    func afterPoll(_ readiness: Poll.Readiness, into session: NGHTTP2Session) throws(HTTP2Error) {
        guard let tls else { return }
        if readiness.shouldRead || tls.hasPendingBytes { try readAvailable(tls: tls, session: session) }
    }

    private func readAvailable(tls: TLSStream, session: NGHTTP2Session) throws(HTTP2Error) {
        while true {
            let result = readBuffer.withUnsafeMutableBytes { tls.read(into: $0) }
            switch result {
            case .bytes(let count):
                lastActivity = MonotonicClock.now()
                try session.receive(readBuffer, count: count)
            case .wouldBlock:
                return
            case .closed:
                throw HTTP2Error(.connection, "\(origin) closed the connection")
            case .failed(let reason):
                throw HTTP2Error(.connection, "connection to \(origin) failed: \(reason)")
            }
        }
    }

    /// Shuts TLS down and closes the socket.
    func close() {
        tls?.shutdown()
        tls = nil
        if socket >= 0 {
            Socket.close(socket)
            socket = -1
        }
    }
}
