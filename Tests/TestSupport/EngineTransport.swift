public import APNs
public import HTTP2
public import MockAPNs
public import Relay

/// An in-memory transport: hands each request to a mock APNs engine and
/// carries out its action (delay, no answer, reset, GOAWAY) as a transport
/// would, without sockets. Network behaviour is tested against the real
/// HTTP/2 server elsewhere; this keeps retry-engine tests fast and exact.
public struct EngineTransport: APNsTransport {
    public let engine: MockAPNsEngine

    public init(engine: MockAPNsEngine) { self.engine = engine }

    public func send(_ request: HTTP2Request, to origin: Origin) async throws(TransportError) -> HTTP2Response {
        let mockRequest = MockRequest(method: request.method, path: request.path, headers: request.headers, body: request.body, connectionID: 1)
        switch engine.handle(mockRequest) {
        case .respond(let response, let delay):
            if delay > 0 {
                do { try await Task.sleep(nanoseconds: UInt64(delay) * 1_000_000) } catch {
                    throw TransportError(.cancelled, "cancelled while waiting for the answer")
                }
            }
            return response
        case .noAnswer:
            do { try await Task.sleep(nanoseconds: UInt64(request.timeout * 1_000_000_000)) } catch {
                throw TransportError(.cancelled, "cancelled while waiting for the answer")
            }
            throw TransportError(.timeout, "no answer within \(request.timeout) s")
        case .hold(let response):
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in engine.park { continuation.resume() } }
            return response
        case .resetConnection:
            throw TransportError(.connection, "connection reset by peer")
        case .goAway(true, let response?):
            return response
        case .goAway:
            // What HTTP2Transport reports once its pool's own resends are
            // spent (that bound is tested over the real pool, GoAwayResendTests).
            throw TransportError(.unprocessed, "GOAWAY: stream above last-stream-id")
        }
    }
}
