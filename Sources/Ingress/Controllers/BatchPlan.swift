import APNs
import Relay

/// What a batch will do, kept small: one entry per item (its send, shared
/// by a fan-out's tokens, or why it was refused) and per send only the
/// item, the token's index and the token. A 10000-token fan-out so holds
/// one operation, not 10000 copies of the snapshot and options.
struct BatchPlan: Sendable {
    enum Item: Sendable {
        case send(app: String, environment: Environment, template: RelayOperation, fanOut: Bool)
        case refused(IngressError)
    }

    struct Send: Sendable {
        var item: Int32
        var tokenIndex: Int32
        /// nil: the template's own (a single send, or an operation without a device token).
        var token: String?
    }

    /// One position of the plan, ready to send or to answer.
    enum Resolved {
        case send(item: Int, tokenIndex: Int?, app: String, environment: Environment, operation: RelayOperation)
        case refused(item: Int, error: IngressError)
    }

    var items: [Item] = []
    var sends: [Send] = []
    /// Items with an `idempotencyKey`, by item index.
    var keys: [Int: KeyedSend] = [:]
    /// Items repeating an earlier item's key with the same send: answered
    /// from that item's answer once the batch has run.
    var repeats: [(position: Int, item: Int, first: Int)] = []

    var count: Int { sends.count }

    /// Positions that are sends (not refused items).
    var sendCount: Int {
        sends.count { if case .send = items[Int($0.item)] { true } else { false } }
    }

    /// The positions that are sends (not refused items), in order: what a run starts.
    var sendPositions: [Int32] {
        var positions: [Int32] = []
        positions.reserveCapacity(sends.count)
        for (position, send) in sends.enumerated() {
            if case .send = items[Int(send.item)] { positions.append(Int32(position)) }
        }
        return positions
    }

    /// The item and error of a refused position; nil for a send.
    func refusal(at position: Int) -> (item: Int, error: IngressError)? {
        let item = Int(sends[position].item)
        guard case .refused(let error) = items[item] else { return nil }
        return (item, error)
    }

    /// The `tokenIndex` a send's result carries: only a fan-out's sends have one.
    func tokenIndex(of position: Int) -> Int? {
        let entry = sends[position]
        guard case .send(_, _, _, let fanOut) = items[Int(entry.item)], fanOut else { return nil }
        return Int(entry.tokenIndex)
    }

    func resolve(_ position: Int) -> Resolved {
        let entry = sends[position]
        let item = Int(entry.item)
        switch items[item] {
        case .refused(let error):
            return .refused(item: item, error: error)
        case .send(let app, let environment, let template, let fanOut):
            let operation = entry.token.map { template.replacingDeviceToken($0) } ?? template
            return .send(item: item, tokenIndex: fanOut ? Int(entry.tokenIndex) : nil, app: app, environment: environment, operation: operation)
        }
    }
}

/// Why a batch stopped starting its items before the end.
enum BatchStop: String, Sendable {
    case draining = "Draining"
    case clientGone = "ClientGone"
    case deadline = "BatchDeadline"

    var message: String {
        switch self {
        case .draining: "not sent: the relay began shutting down before this send started; retry it on another instance"
        case .clientGone: "not sent: the client closed the connection before this send started"
        case .deadline: "not sent: the batch deadline (ingress.batch_deadline_seconds) passed before this send started; retry it in a smaller batch"
        }
    }
}
