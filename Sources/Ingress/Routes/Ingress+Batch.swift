import APNs
import HTTPServer
import Relay
import RelayJSON

extension Ingress {
    /// `POST /v1/send/batch`: up to ``Configuration/maximumBatchItems`` items,
    /// each a send (or a fan-out over `tokens`), answered with one result per
    /// send in order. A bad item fails alone; a bad envelope fails the batch.
    @Sendable func batch(_ call: Call) async throws(IngressError) -> HTTPResponse {
        var reader = try FieldReader(try body(call.request), path: "")
        guard let items = try reader.array("items") else { throw .invalid("items", "is required: an array of sends") }
        try reader.rejectUnknown(allowed: "items")
        guard !items.isEmpty else { throw .invalid("items", "must hold at least one send") }
        guard items.count <= configuration.maximumBatchItems else {
            var error = IngressError.invalid("items", "holds \(items.count) sends; at most \(configuration.maximumBatchItems) per batch")
            error.status = 413
            error.type = "PayloadTooLarge"
            throw error
        }

        /// One planned send, or the reason its item was refused.
        enum Planned {
            case send(item: Int, tokenIndex: Int?, app: String, environment: Environment, operation: RelayOperation)
            case refused(item: Int, error: IngressError)
        }
        var plan: [Planned] = []
        for (index, item) in items.enumerated() {
            do {
                let request = try decodeSend(item, call, path: "items[\(index)]", allowFanOut: true)
                let fanOut = request.operations.count > 1 || (item["tokens"] != nil)
                for (tokenIndex, operation) in request.operations.enumerated() {
                    plan.append(.send(item: index, tokenIndex: fanOut ? tokenIndex : nil, app: request.app, environment: request.environment, operation: operation))
                }
            } catch {
                plan.append(.refused(item: index, error: error))
            }
            if plan.count > configuration.maximumBatchSends {
                var error = IngressError.invalid("items", "fans out to more than \(configuration.maximumBatchSends) sends")
                error.status = 413
                error.type = "PayloadTooLarge"
                throw error
            }
        }
        // The guard charged one request; the rest of the batch's sends count too.
        if let rate = call.key.ratePerSecond, plan.count > 1 {
            let burst = call.key.burst ?? rate
            // A bucket never holds more than the burst, so a bigger batch could never
            // be charged in full: a Retry-After would invite the same 429 forever.
            guard Double(plan.count) <= burst else { throw Self.batchOverBurst(sends: plan.count, key: call.key, burst: burst) }
            if let wait = limiter.acquire(key: call.key.name, ratePerSecond: rate, burst: burst, cost: Double(plan.count - 1)) {
                var error = IngressError(status: 429, type: "RateLimited", message: "this batch of \(plan.count) sends is over API key \(call.key.name)'s \(rate) sends/s limit")
                error.retryAfter = wait
                throw error
            }
        }

        var results = [JSONValue](repeating: .null, count: plan.count)
        await withTaskGroup(of: (Int, JSONValue).self) { group in
            var next = 0
            func startNext() {
                guard next < plan.count else { return }
                let position = next
                next += 1
                let planned = plan[position]
                group.addTask { [self] in
                    switch planned {
                    case .refused(let item, let error):
                        return (position, Self.batchEntry(item: item, tokenIndex: nil, result: .failure(error)))
                    case .send(let item, let tokenIndex, let app, let environment, let operation):
                        do throws(IngressError) {
                            let result = try await perform(app, environment, operation, call)
                            return (position, Self.batchEntry(item: item, tokenIndex: tokenIndex, result: .success(result)))
                        } catch {
                            return (position, Self.batchEntry(item: item, tokenIndex: tokenIndex, result: .failure(error)))
                        }
                    }
                }
            }
            for _ in 0..<min(configuration.batchConcurrency, plan.count) { startNext() }
            while let (position, entry) = await group.next() {
                results[position] = entry
                startNext()
            }
        }
        let succeeded = results.filter { $0["ok"] == .bool(true) }.count
        let body = JSONValue.object(JSONObject([
            ("results", .array(results)),
            ("summary", .object(JSONObject([
                ("total", .integer(Int64(results.count))),
                ("succeeded", .integer(Int64(succeeded))),
                ("failed", .integer(Int64(results.count - succeeded))),
            ]))),
        ]))
        return .json(200, body.encoded())
    }

    /// 429 `BatchExceedsBurst`, without Retry-After: the batch must be split, not retried.
    static func batchOverBurst(sends: Int, key: APIKey, burst: Double) -> IngressError {
        let limit = Int(exactly: burst.rounded(.down)).map(String.init) ?? "\(burst)"
        return IngressError(
            status: 429, type: "BatchExceedsBurst",
            message: "items: this batch fans out to \(sends) sends, more than API key \(key.name)'s burst of \(limit); "
                + "it can never pass as is: split it into batches of at most \(limit) sends",
            field: "items")
    }

    static func batchEntry(item: Int, tokenIndex: Int?, result: Result<SendResult, IngressError>) -> JSONValue {
        var members: [(String, JSONValue)] = [("item", .integer(Int64(item)))]
        if let tokenIndex { members.append(("tokenIndex", .integer(Int64(tokenIndex)))) }
        switch result {
        case .success(let result):
            members.append(("ok", .bool(true)))
            members += successBody(result).members.map { ($0.key, $0.value) }
        case .failure(let error):
            members.append(("ok", .bool(false)))
            members.append(("error", error.object))
        }
        return .object(JSONObject(members))
    }
}
