import RelayBasics

/// What the session reports from the frames it receives, called inside
/// `NGHTTP2Session.receive` and `collectOutput` on the connection's thread.
extension ClientSession: NGHTTP2SessionDelegate {
    func sessionBeganHeaders(stream: Int32) {}

    func sessionReceivedHeader(stream: Int32, name: String, value: String) {
        guard let index = table.receiving(stream) else { return }
        if name == ":status" {
            table.setStatus(Int(value), at: index)
        } else if !name.hasPrefix(":") {
            guard table.headerCount(at: index) < configuration.maximumResponseHeaders else {
                refuseOversized(stream, at: index, "more than \(configuration.maximumResponseHeaders) header fields")
                return
            }
            table.appendHeader(HTTPHeader(name, value), at: index)
        }
    }

    func sessionStreamEnded(stream: Int32) {
        table.markEnded(stream)
    }

    func sessionSentStreamEnd(stream: Int32) {
        table.markRequestWritten(stream)
    }

    func sessionReceivedData(stream: Int32, bytes: UnsafeRawBufferPointer) {
        guard let index = table.receiving(stream) else { return }
        // Compared without adding, so no length can overflow.
        guard bytes.count <= configuration.maximumResponseBodyBytes - table.bodyCount(at: index) else {
            refuseOversized(stream, at: index, "a response body over \(configuration.maximumResponseBodyBytes) bytes")
            return
        }
        table.appendBody(bytes, at: index)
    }

    /// Drops what the stream's response brought so far and resets the
    /// stream; its request fails with `reason` when the stream closes.
    private func refuseOversized(_ stream: Int32, at index: StreamTable.Index, _ reason: String) {
        table.refuse(at: index, reason)
        session?.submitReset(stream: stream, errorCode: NGHTTP2Session.cancel)
    }

    func sessionStreamClosed(stream: Int32, errorCode: UInt32) {
        guard let record = table.remove(stream) else { return }
        if let reason = record.oversized {
            complete(record.pending, .failure(HTTP2Error(.proto, "\(configuration.origin) stream \(stream) refused: \(reason)", written: record.requestWritten)))
        } else if let status = record.status, record.ended, errorCode == NGHTTP2Session.noError {
            answeredStreams += 1
            complete(record.pending, .success(HTTP2Response(status: status, headers: record.headers, body: record.body)))
        } else if errorCode == NGHTTP2Session.refusedStream || (goAwayLastStream.map { stream > $0 } ?? false) {
            complete(record.pending, .failure(unprocessed("\(configuration.origin) refused stream \(stream)")))
        } else {
            complete(record.pending, .failure(HTTP2Error(
                .streamReset, "\(configuration.origin) reset stream \(stream) (HTTP/2 error \(errorCode))", written: record.requestWritten)))
        }
    }

    func sessionReceivedGoAway(lastStream: Int32, errorCode: UInt32) {
        goAwayLastStream = lastStream
        handOff.setState(.goingAway)
        events.report(.goaway)
        // Streams the server will never process come back as unprocessed now,
        // so the pool resends them on another connection at once.
        for (stream, record) in table.removeStreams(above: lastStream) {
            complete(record.pending, .failure(unprocessed("stream \(stream) above GOAWAY's last-stream-id \(lastStream)")))
        }
        for pending in table.takeWaiting() {
            complete(pending, .failure(HTTP2Error(.notSent, "\(configuration.origin) is going away")))
        }
    }

    // Stream closure reports it, with the error code, to the waiting caller.
    func sessionReceivedReset(stream: Int32, errorCode: UInt32) {}

    func sessionReceivedPingAck() {
        pingSentAt = nil
    }

    func sessionReceivedSettings() {
        peerSettingsReceived = true
    }
}
