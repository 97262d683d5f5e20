import APNs
import Testing

@Suite("APNs reason catalog")
struct ReasonCatalogTests {
    static func retryRule(_ text: String) -> APNsReason.RetryRule? {
        switch text {
        case "no": .never
        case "yes": .withBackoff
        case "yes, honour Retry-After": .honouringRetryAfter
        case "once, after minting a fresh JWT": .onceWithFreshToken
        case "yes, on a new connection": .onNewConnection
        default: nil
        }
    }

    @Test("matches apns-reasons.tsv row for row")
    func matchesReference() throws {
        let table = try ReferenceTable(resource: "apns-reasons")
        #expect(table.columns == ["reason", "status", "retry", "drop_token", "trap", "meaning"])
        #expect(APNsReason.catalog.map(\.name) == table.rows.map { $0["reason"]! })
        for row in table.rows {
            let name = try #require(row["reason"])
            let reason = try #require(APNsReason.named(name), "\(name) missing from the catalog")
            #expect(reason.status == Int(row["status"]!), "\(name) status")
            #expect(reason.retry == Self.retryRule(row["retry"]!), "\(name) retry")
            #expect(reason.dropsToken == (row["drop_token"] == "yes"), "\(name) drop_token")
            #expect(reason.trapID?.rawValue ?? "-" == row["trap"], "\(name) trap")
            #expect(reason.meaning == row["meaning"], "\(name) meaning")
            #expect(!reason.fix.isEmpty, "\(name) has a fix")
        }
    }

    @Test("the bundled fixtures equal the tables in docs/reference")
    func bundledCopyIsCurrent() throws {
        for name in ["apns-reasons", "traps"] {
            #expect(try ReferenceTable.bundledText(named: name) == ReferenceTable.documentedText(named: name),
                    "Tests/APNsTests/Fixtures/\(name).tsv drifted from docs/reference/\(name).tsv")
        }
    }

    @Test("every reason maps from an APNs answer", arguments: APNsReason.catalog)
    func mapsFromResponse(reason: APNsReason) throws {
        let id = try #require(APNsID("7f1c8f0e-3d2b-4b7a-9c1d-2e3f4a5b6c7d"))
        let body = Array(#"{"reason":"\#(reason.name)"}"#.utf8)
        let error = APNsError.fromResponse(status: reason.status, body: body, apnsID: id)
        #expect(error.stage == .apns)
        #expect(error.code.rawValue == reason.name)
        #expect(error.reason == reason.name)
        #expect(error.status == reason.status)
        #expect(error.dropsToken == reason.dropsToken)
        #expect(error.trapID == reason.trapID)
        #expect(error.fix == reason.fix)
        #expect(error.apnsID == id)
        #expect(error.message.contains(reason.name))
    }

    @Test("410 carries the unregistration timestamp")
    func unregisteredTimestamp() {
        let body = Array(#"{"reason":"Unregistered","timestamp":1700000000123}"#.utf8)
        let error = APNsError.fromResponse(status: 410, body: body, apnsID: nil)
        #expect(error.unregisteredAt == 1_700_000_000_123)
        #expect(error.dropsToken)
        #expect(error.trapID == .deadToken)
    }

    // Whether these are retried is RetryPolicy.decide's to say: RetryDecisionTests.
    @Test("an unknown reason is kept verbatim, without a trap")
    func unknownReason() {
        let client = APNsError.fromResponse(status: 400, body: Array(#"{"reason":"BrandNewReason"}"#.utf8), apnsID: nil)
        #expect(client.code.rawValue == "BrandNewReason")
        #expect(client.trapID == nil)
        let server = APNsError.fromResponse(status: 502, body: [], apnsID: nil)
        #expect(server.code.rawValue == "HTTP502")
        #expect(server.status == 502)
    }

    @Test("a 5xx without a body falls back to the reason its status implies")
    func bodilessServerErrors() {
        #expect(APNsError.fromResponse(status: 500, body: [], apnsID: nil).code.rawValue == "InternalServerError")
        let unavailable = APNsError.fromResponse(status: 503, body: Array("<html>".utf8), apnsID: nil)
        #expect(unavailable.code.rawValue == "ServiceUnavailable")
        #expect(unavailable.status == 503)
    }
}

@Suite("Trap catalog")
struct TrapCatalogTests {
    @Test("matches traps.tsv row for row")
    func matchesReference() throws {
        let table = try ReferenceTable(resource: "traps")
        #expect(table.columns == ["trap", "severity", "error_types", "what_it_means", "operator_action"])
        #expect(Trap.catalog.map(\.id.rawValue) == table.rows.map { $0["trap"]! })
        for row in table.rows {
            let trap = try #require(Trap.withID(TrapID(rawValue: row["trap"]!)))
            #expect(trap.severity.rawValue == row["severity"])
            let types = row["error_types"] == "-" ? [] : row["error_types"]!.components(separatedBy: ", ")
            #expect(trap.errorTypes == types)
            #expect(trap.meaning == row["what_it_means"])
            #expect(trap.operatorAction == row["operator_action"])
        }
    }

    @Test("every trap a reason names exists, and maps back from the reason")
    func reasonsPointAtTraps() throws {
        for reason in APNsReason.catalog {
            guard let id = reason.trapID else { continue }
            let trap = try #require(Trap.withID(id), "\(reason.name) names unknown trap \(id)")
            #expect(trap.errorTypes.contains(reason.name), "\(id) does not list \(reason.name)")
        }
        #expect(Trap.id(forErrorType: "BadDeviceToken") == .tokenEnvironmentMismatch)
        #expect(Trap.id(forErrorType: "InvalidSnapshot") == .invalidSnapshot)
    }
}
