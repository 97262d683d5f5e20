import RelayBasics

extension ConnectionCore: NGHTTP2SessionDelegate {
    func sessionBeganHeaders(stream: Int32) {}

    func sessionReceivedHeader(stream: Int32, name: String, value: String) {
        // Updated in place through the index: `streams[stream] != nil` then
        // `streams[stream]?.…` copied the state out and hashed twice.
        guard let index = streams.index(forKey: stream), streams.values[index].oversized == nil else { return }
        if name == ":status" {
            streams.values[index].status = Int(value)
        } else if !name.hasPrefix(":") {
            guard streams.values[index].headers.count < configuration.maximumResponseHeaders else {
                refuseOversized(stream, at: index, "more than \(configuration.maximumResponseHeaders) header fields")
                return
            }
            streams.values[index].headers.append(HTTPHeader(name, value))
        }
    }

    func sessionStreamEnded(stream: Int32) {
        // Through the index, as above: `streams[stream]?.ended = true` went
        // through the dictionary's and the optional's modify accessors, three
        // heap allocations per answer.
        guard let index = streams.index(forKey: stream) else { return }
        streams.values[index].ended = true
    }

    func sessionReceivedData(stream: Int32, bytes: UnsafeRawBufferPointer) {
        guard let index = streams.index(forKey: stream), streams.values[index].oversized == nil else { return }
        // Compared without adding, so no length can overflow.
        guard bytes.count <= configuration.maximumResponseBodyBytes - streams.values[index].body.count else {
            refuseOversized(stream, at: index, "a response body over \(configuration.maximumResponseBodyBytes) bytes")
            return
        }
        streams.values[index].body.append(contentsOf: bytes)
    }

    /// Drops what the stream's response brought so far and resets the
    /// stream; its request fails with `reason` when the stream closes.
    private func refuseOversized(_ stream: Int32, at index: Dictionary<Int32, StreamState>.Index, _ reason: String) {
        streams.values[index].oversized = reason
        streams.values[index].headers = []
        streams.values[index].body = []
        session?.submitReset(stream: stream, errorCode: NGHTTP2Session.cancel)
    }

    func sessionStreamClosed(stream: Int32, errorCode: UInt32) {
        guard let state = streams.removeValue(forKey: stream) else { return }
        streamByToken[state.pending.token] = nil
        if let reason = state.oversized {
            complete(state.pending, .failure(HTTP2Error(.proto, "\(configuration.origin) stream \(stream) refused: \(reason)")))
        } else if let status = state.status, state.ended, errorCode == NGHTTP2Session.noError {
            answeredStreams += 1
            complete(state.pending, .success(HTTP2Response(status: status, headers: state.headers, body: state.body)))
        } else if errorCode == NGHTTP2Session.refusedStream || (goAwayLastStream.map { stream > $0 } ?? false) {
            complete(state.pending, .failure(unprocessed("\(configuration.origin) refused stream \(stream)")))
        } else {
            complete(state.pending, .failure(HTTP2Error(.streamReset, "\(configuration.origin) reset stream \(stream) (HTTP/2 error \(errorCode))")))
        }
    }

    func sessionReceivedGoAway(lastStream: Int32, errorCode: UInt32) {
        goAwayLastStream = lastStream
        setState(.goingAway)
        report(.goaway)
        // Streams the server will never process come back as unprocessed now,
        // so the pool resends them on another connection at once.
        for (stream, state) in streams where stream > lastStream {
            removeStream(stream)
            complete(state.pending, .failure(unprocessed("stream \(stream) above GOAWAY's last-stream-id \(lastStream)")))
        }
        let neverSent = waiting[waitingHead...]
        waiting.removeAll()
        waitingHead = 0
        for pending in neverSent {
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

    /// A sent request the server did not process, saying whether the server
    /// processed other streams here (``HTTP2Error/serverMadeProgress``).
    func unprocessed(_ message: String) -> HTTP2Error {
        var error = HTTP2Error(.unprocessed, message)
        error.serverMadeProgress = answeredStreams > 0 || (goAwayLastStream ?? 0) > 0
        return error
    }
}
