import RelayBasics

/// nghttp2's callbacks for a server connection, on the thread serving it:
/// requests assembled in ``IncomingRequests``, each complete one handed to
/// the server's handler (or refused), the graceful close's counts kept.
extension ServerConnection: NGHTTP2SessionDelegate {
    func sessionBeganHeaders(stream: Int32) {
        closing.streamBegan(stream)
        requests.began(stream, at: MonotonicClock.now())
    }

    func sessionReceivedHeader(stream: Int32, name: String, value: String) {
        requests.header(stream, name: name, value: value)
    }

    func sessionReceivedData(stream: Int32, bytes: UnsafeRawBufferPointer) {
        requests.data(stream, bytes: bytes)
    }

    func sessionStreamEnded(stream: Int32) {
        guard let request = requests.end(stream) else { return }
        if let status = request.refusedWith {
            answers.add(due: 0, stream: stream, response: listener.configuration.limitResponse(status))
            return
        }
        if closing.refuses(stream) {
            session?.submitReset(stream: stream, errorCode: NGHTTP2Session.refusedStream)
            return
        }
        listener.handler(
            HTTP2ServerRequest(
                method: request.method, path: request.path, authority: request.authority, headers: request.headers, body: request.body,
                connectionID: id, streamID: stream, clientCertificate: io.clientCertificate),
            HTTP2Responder(connection: self, stream: stream))
    }

    func sessionStreamClosed(stream: Int32, errorCode: UInt32) {
        closing.streamClosed()
        requests.close(stream)
    }

    func sessionReceivedGoAway(lastStream: Int32, errorCode: UInt32) {}

    func sessionReceivedPingAck() {
        closing.pingAcknowledgedByPeer()
    }

    func sessionReceivedReset(stream: Int32, errorCode: UInt32) {
        listener.configuration.onStreamReset?(id, stream, errorCode)
    }

    func sessionReceivedSettings() {}
}
