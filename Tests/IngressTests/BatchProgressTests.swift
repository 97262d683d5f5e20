import APNs
import HTTPServer
@testable import Ingress
import Logging
@testable import Relay
import RelayJSON
import Synchronization
import Testing

/// The batch runner's shared state (``BatchProgress``) and the idempotency
/// gate, driven without a server: the seams the ingress controllers split out.
@Suite("Batch progress and idempotency gate")
struct BatchProgressTests {
    /// Item 0 fans out over three tokens; item 1 was refused. Positions:
    /// 0 and 1 are item 0's tokens 0 and 1, 2 is item 1, 3 is item 0's token 2.
    static func plan() -> BatchPlan {
        var plan = BatchPlan()
        plan.items = [
            .send(app: "app", environment: .development, template: .background(token: String(repeating: "a", count: 64)), fanOut: true),
            .refused(.invalid("items[1].token", "must be hex")),
        ]
        plan.sends = [
            .init(item: 0, tokenIndex: 0, token: String(repeating: "b", count: 64)),
            .init(item: 0, tokenIndex: 1, token: String(repeating: "c", count: 64)),
            .init(item: 1, tokenIndex: 0, token: nil),
            .init(item: 0, tokenIndex: 2, token: String(repeating: "d", count: 64)),
        ]
        return plan
    }

    @Test("sends are handed out in chunks past refused items; a stop answers every unstarted send NotSent once and keeps the budget of those still running")
    func chunksAndStop() throws {
        let progress = BatchProgress(plan: Self.plan())
        #expect(progress.sendPositions == [0, 1, 3])
        #expect(progress.claim(upTo: 2) == [0, 1])
        #expect(progress.hasMore && !progress.isStopped)
        #expect(progress.unsettled == 3)
        progress.finish(position: 0, entry: Array(#"{"item":0}"#.utf8), ok: true, answer: nil)
        #expect(progress.unsettled == 2)

        #expect(progress.stop(.deadline) == 1, "position 3 never started")
        #expect(progress.stop(.draining) == 0, "the first reason wins; nothing is answered twice")
        #expect(progress.claim(upTo: 16).isEmpty && !progress.hasMore && progress.isStopped)
        #expect(progress.unsettled == 1, "position 1 still runs and holds its budget unit")

        let run = progress.result()
        #expect(run.stop == .deadline && run.notSent == 1 && run.succeeded == 1)
        let entry = try JSONParser.parse(run.entries[3])
        #expect(entry["item"]?.integerValue == 0 && entry["tokenIndex"]?.integerValue == 2 && entry["ok"] == .bool(false))
        #expect(entry["error"]?["type"]?.stringValue == "NotSent" && entry["error"]?["reason"]?.stringValue == "BatchDeadline")
        #expect(run.entries[2].isEmpty, "a refused position is the route's to answer, not the run's")
    }

    @Test("without a store a keyed send is refused 503 Unavailable naming the header, and nothing is sent")
    func gateWithoutStore() async throws {
        let gate = IdempotencyGate(store: nil, onReplay: nil, logger: Logger(label: "test"))
        #expect(!gate.keepsKeys)
        let key = try #require(APIKey(name: "backend", sha256Hex: IngressStepsTests.sha256Hex("secret"), apps: nil))
        let call = Ingress.Call(request: HTTPRequest(method: "POST", path: "/v1/send"), key: key, span: nil)
        let keyed = IdempotencyKeys.keyedSend("k-1", field: IdempotencyKeys.idempotencyHeader, app: "app", call: call, canonical: Array("send".utf8))
        let sent = Mutex(0)
        do throws(IngressError) {
            _ = try await gate.runKeyed(keyed, call) { _ throws(IngressError) in
                sent.withLock { $0 += 1 }
                throw .invalid("never", "called")
            }
            Issue.record("a keyed send without a store was not refused")
        } catch {
            #expect(error.status == 503 && error.type == .unavailable && error.field == "Idempotency-Key" && error.retryAfter == 30)
            #expect(error.message.contains("audit.database_url"))
        }
        #expect(sent.withLock { $0 } == 0)
        #expect(await gate.recordKeyed(keyed, .failure(.invalid("x", "y")), HTTPResponse(status: 400, headers: [], body: [])) == nil)
    }
}
