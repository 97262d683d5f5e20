@testable import HTTP2
import Testing

/// How a server connection ends, on its own: no thread, socket or session.
/// The graceful stop's order (answers, then a PING, then the GOAWAY once the
/// PING is acknowledged) is what httpx clients need to get every answer;
/// APNsHTTP2FaultProcessTests' drain cases test it with httpx itself.
@Suite("Server connection: closing")
struct ServerConnectionClosingTests {
    typealias Closing = ServerConnection.Closing
    static let second: UInt64 = 1_000_000_000

    @Test("abrupt: the GOAWAY goes at once and the close waits for it to be written")
    func abrupt() {
        var closing = Closing()
        closing.streamBegan(1)
        closing.closeNow()
        #expect(closing.next(now: 0, answersWaiting: false) == nil, "no graceful steps")
        #expect(!closing.closesNow(now: 0, outputWritten: false))
        #expect(closing.closesNow(now: 0, outputWritten: true))
        #expect(!closing.refuses(3), "an abrupt close refuses nothing by itself: the GOAWAY does")
    }

    @Test("graceful: streams taken are answered first, a later one is refused, the PING follows the last answer, the GOAWAY its acknowledgement")
    func graceful() {
        var closing = Closing()
        closing.streamBegan(1)
        closing.streamBegan(3)
        closing.beginGraceful(now: 0, grace: 20 * Self.second)
        #expect(!closing.refuses(3) && closing.refuses(5))
        closing.streamBegan(5)  // refused by the connection: nghttp2 still closes it
        #expect(closing.next(now: 1, answersWaiting: false) == nil, "three streams open")
        closing.streamClosed()
        closing.streamClosed()
        #expect(closing.next(now: 2, answersWaiting: false) == nil, "one stream open")
        closing.streamClosed()
        #expect(closing.next(now: 3, answersWaiting: true) == nil, "an answer is still scheduled")
        #expect(closing.next(now: 4, answersWaiting: false) == .ping)
        #expect(closing.next(now: 5, answersWaiting: false) == nil, "waits for the acknowledgement")
        #expect(!closing.closesNow(now: 5, outputWritten: true))
        closing.pingAcknowledgedByPeer()
        #expect(closing.next(now: 6, answersWaiting: false) == .goAway)
        #expect(closing.next(now: 7, answersWaiting: false) == nil, "one GOAWAY")
        #expect(!closing.closesNow(now: 7, outputWritten: false), "the GOAWAY is written first")
        #expect(closing.closesNow(now: 7, outputWritten: true))
    }

    @Test("graceful: a client that never acknowledges the PING gets the GOAWAY a second later, and one that stopped reading is closed anyway")
    func unacknowledged() {
        var closing = Closing()
        closing.beginGraceful(now: 0, grace: 20 * Self.second)
        #expect(closing.next(now: 10, answersWaiting: false) == .ping)
        #expect(closing.next(now: 10 + Self.second - 1, answersWaiting: false) == nil)
        #expect(closing.next(now: 10 + Self.second, answersWaiting: false) == .goAway)
        #expect(closing.closesNow(now: 10 + Self.second, outputWritten: false), "past its time the output left unwritten is dropped")
    }

    @Test("graceful: at the end of the grace the GOAWAY goes with streams still open, and a PING acknowledged before any was sent counts for nothing")
    func graceEnds() {
        var closing = Closing()
        closing.streamBegan(1)
        closing.pingAcknowledgedByPeer()  // a keep-alive's acknowledgement, say
        closing.beginGraceful(now: 0, grace: 5 * Self.second)
        #expect(closing.next(now: 5 * Self.second - 1, answersWaiting: false) == nil)
        #expect(closing.next(now: 5 * Self.second, answersWaiting: false) == .goAway)
    }
}
