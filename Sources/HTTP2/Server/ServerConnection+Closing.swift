extension ServerConnection {
    /// How a server connection ends, as state its loop thread alone reads
    /// and changes: no I/O here, so every step is testable without a socket.
    ///
    /// Two ways to go. Abrupt (a mock APNs stopping, a GOAWAY the handler
    /// asked for): the GOAWAY goes out at once and the connection closes
    /// once it is written. Graceful (``HTTP2Server/stop(grace:)`` with a
    /// grace, the APNs ingress's drain): streams opened from then on are
    /// refused, the ones taken are answered, a PING follows the last answer,
    /// and the GOAWAY waits for its acknowledgement (the client has then
    /// read every answer), 1 s at most, or the end of the grace. Sent with
    /// the answers, a GOAWAY can reach a client's reader first, and
    /// httpx/httpcore then fails every stream whose task had not taken its
    /// answer yet (python-hyper's h2 refuses any frame after one).
    struct Closing {
        /// What the connection's turn must do now.
        enum Step: Equatable {
            /// Send a PING after the answers.
            case ping
            /// Send the GOAWAY naming the last stream processed, then close
            /// once it is written.
            case goAway
        }

        /// The GOAWAY is submitted: close once the output is written.
        private(set) var closesAfterFlush = false
        /// Graceful: the GOAWAY goes out by this (MonotonicClock) at the latest.
        private(set) var gracefulDeadline: UInt64?
        /// Streams the peer opened that nghttp2 has not closed yet.
        private(set) var openStreams = 0
        /// The highest stream id the peer opened so far.
        private var highestStream: Int32 = 0
        /// Graceful: the last stream taken; a later one is refused.
        private var lastStreamTaken: Int32?
        private var pingSent = false
        private var pingAcknowledged = false

        /// How long the PING's acknowledgement is waited for once every
        /// stream is answered: a client that reads acknowledges within a
        /// round trip; one that does not holds a drain a second at most.
        static let pingAcknowledgementWait: UInt64 = 1_000_000_000

        /// The peer began a stream (its first HEADERS).
        mutating func streamBegan(_ stream: Int32) {
            guard stream > highestStream else { return }
            highestStream = stream
            openStreams += 1
        }

        /// nghttp2 closed a stream (answered, reset or refused).
        mutating func streamClosed() {
            openStreams -= 1
        }

        /// A stream opened after a graceful stop began: refused
        /// (REFUSED_STREAM), so its client sends it elsewhere.
        func refuses(_ stream: Int32) -> Bool {
            lastStreamTaken.map { stream > $0 } ?? false
        }

        /// The GOAWAY goes out now (the abrupt way).
        mutating func closeNow() {
            closesAfterFlush = true
        }

        /// A graceful stop with `grace` nanoseconds from `now`.
        mutating func beginGraceful(now: UInt64, grace: UInt64) {
            gracefulDeadline = min(gracefulDeadline ?? .max, now &+ grace)
            lastStreamTaken = lastStreamTaken ?? highestStream
        }

        mutating func pingAcknowledgedByPeer() {
            if pingSent { pingAcknowledged = true }
        }

        /// What a graceful stop does next, after this turn's answers are
        /// handed to nghttp2 and collected (a stream closes as its answer's
        /// last frame is). `answersWaiting`: answers scheduled for later.
        mutating func next(now: UInt64, answersWaiting: Bool) -> Step? {
            guard let deadline = gracefulDeadline, !closesAfterFlush else { return nil }
            if !pingSent, openStreams <= 0, !answersWaiting {
                pingSent = true
                gracefulDeadline = min(deadline, now &+ Self.pingAcknowledgementWait)
                return .ping
            }
            guard pingAcknowledged || now >= deadline else { return nil }
            closesAfterFlush = true
            return .goAway
        }

        /// Whether the close begins now: the GOAWAY is written, or a
        /// graceful stop's time is up (a client that stopped reading holds
        /// nothing longer).
        func closesNow(now: UInt64, outputWritten: Bool) -> Bool {
            closesAfterFlush && (outputWritten || gracefulDeadline.map { now >= $0 } == true)
        }
    }
}
