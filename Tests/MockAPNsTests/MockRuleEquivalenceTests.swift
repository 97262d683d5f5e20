@testable import MockAPNs
import RelayBasics
import Synchronization
import Testing
import TestSupport

/// The mock reads its hot rules as bytes (issue 15: it shares the bench's two
/// cores with the relay). Each must answer exactly as the string code it
/// replaced, restated here as the reference, on ordinary and awkward input:
/// non-ASCII text, combining marks after a separator, CR LF, empty parts.
@Suite("Mock APNs: byte-level rules agree with the string rules they replaced")
struct MockRuleEquivalenceTests {
    static let texts: [String] = [
        "", "/", "//", "a", "/3/device/", "/3/device/\(token64)", "3/device/abc", "/3/device/abc/", "/3//device/abc",
        "/4/broadcasts/apps/com.example.app", "/1/apps/com.example.app/channels", "/3/device/\u{301}\(token64)",
        "/3/device\u{301}/abc", "/3/dévice/abc", "/\r\n/x", "/3/device/ab\u{301}", "é/3", "/3/device/😀",
        "7f1c8f0e-3d2b-4b7a-9c1d-2e3f4a5b6c7d", "7F1C8F0E-3D2B-4B7A-9C1D-2E3F4A5B6C7D", "7f1c8f0e3d2b-4b7a-9c1d-2e3f4a5b6c7d-",
        "7f1c8f0e-3d2b-4b7a-9c1d-2e3f4a5b6c7", "7f1c8f0e-3d2b-4b7a-9c1d-2e3f4a5b6c7dd", "7f1c8f0e-3d2b-4b7a-9c1d-2e3f4a5b6c7g",
        "7f1c8f0e-3d2b-4b7a-9c1d-2e3f4a5b6c7\u{301}", "7f1c8f0e-\u{301}3d2b-4b7a-9c1d-2e3f4a5b6c7d", "7f1c8f0e--3d2-4b7a-9c1d-2e3f4a5b6c7d",
        "----", "nope", "7f1c8f0e-3d2b-4b7a-9c1d-2e3f4a5b6c7d\n",
    ]

    @Test("isUUID: 8-4-4-4-12 hex digits, as the split into characters read it")
    func uuid() {
        for text in Self.texts {
            let parts = text.split(separator: "-", omittingEmptySubsequences: false)
            let reference = parts.map(\.count) == [8, 4, 4, 4, 12] && parts.allSatisfy { $0.utf8.allSatisfy(Hex.isDigit) }
            #expect(MockRules.isUUID(text) == reference, "\(text.debugDescription)")
        }
    }

    @Test("path segments: as split(separator: \"/\").dropFirst(), a slash with a combining mark no separator")
    func segments() {
        for text in Self.texts {
            let reference = Array(text.split(separator: "/", omittingEmptySubsequences: false).dropFirst())
            #expect(MockRules.pathSegments(text) == reference, "\(text.debugDescription)")
        }
        #expect(MockRules.pathSegments("/3/device/\u{301}abc") == ["3", "device/\u{301}abc"])
    }

    @Test("duplicate header names: pairwise for a few, a set for many, the same verdict")
    func duplicates() {
        let names = (0..<40).map { "x-header-\($0)" }
        for count in [0, 1, 2, 5, 16, 17, 40] {
            let distinct = names.prefix(count).map { HTTPHeader($0, "v") }
            #expect(!MockRules.hasDuplicateNames(distinct))
            guard count >= 2 else { continue }
            for (first, second) in [(0, count - 1), (count / 2, count - 1), (0, 1)] where first != second {
                var headers = distinct
                headers[second] = HTTPHeader(headers[first].name, "other")
                #expect(MockRules.hasDuplicateNames(headers), "\(count) headers, \(first) and \(second)")
            }
        }
    }

    @Test("bearer prefix: any case, as lowercasing the whole value read it; the token after it unchanged")
    func bearer() {
        let values = [
            "", "bearer", "bearer ", "bearer x.y.z", "Bearer x.y.z", "BEARER x.y.z", "bEaReR X.Y.Z", "bearerx.y.z", "bearer\tx",
            "basic x", " bearer x", "bearer  x", "bearer é", "béarer x", "bearer \u{301}x", "BEARER\u{301} x", "bearer \r\nx",
            "\u{212A}bearer x", "bearer x\u{212A}",
        ]
        for value in values {
            let reference = value.lowercased().hasPrefix("bearer ") ? String(value.dropFirst("bearer ".count)) : nil
            #expect(ProviderTokenVerifier.bearerToken(value) == reference, "\(value.debugDescription)")
        }
    }

    @Test("the last token seen answers as the token table: expired, wrong team and tampered tokens between valid ones, one verification per distinct token")
    func lastToken() throws {
        let mock = try MockFixture()
        let valid = mock.validToken
        var characters = Array(valid)
        characters[characters.count - 20] = characters[characters.count - 20] == "A" ? "B" : "A"
        let tampered = String(characters)
        let sequence: [(String, Int, String?)] = [
            ("bearer \(valid)", 200, nil), ("bearer \(valid)", 200, nil),
            ("bearer \(mock.signer.tokens[1])", 403, "ExpiredProviderToken"), ("bearer \(mock.signer.tokens[1])", 403, "ExpiredProviderToken"),
            ("Bearer \(valid)", 200, nil), ("bearer \(tampered)", 403, "InvalidProviderToken"), ("bearer \(tampered)", 403, "InvalidProviderToken"),
            ("bearer \(valid)", 200, nil), ("bearer \(mock.signer.tokens[2])", 403, "InvalidProviderToken"), ("bearer\(valid)", 403, "InvalidProviderToken"),
            ("bearer \(valid)", 200, nil),
        ]
        for (authorization, status, reason) in sequence {
            let result = answer(mock.send(authorization: authorization))
            #expect(result.status == status && result.reason == reason, "\(authorization.prefix(12))…: \(result)")
        }
        // valid, expired and tampered: each verified once however often it came back (the wrong team is refused before its signature).
        #expect(mock.engine.signatureVerifications == 3)
    }

    @Test("a token that ages past the hour is rejected though it was the last one accepted")
    func lastTokenAges() throws {
        let clock = Mutex<Int64>(now)
        let signer = try IndependentSigner(claims: [("KEYID00001", "TEAMID0001", now)])
        var configuration = MockAPNsConfiguration()
        configuration.keys = [.init(keyID: "KEYID00001", teamID: "TEAMID0001", publicKeyPEM: signer.publicKeyPEM)]
        let engine = try MockAPNsEngine(configuration: configuration, now: { clock.withLock { $0 } })
        let request = MockRequest(
            method: "POST", path: "/3/device/\(token64)",
            headers: [HTTPHeader("authorization", "bearer \(signer.tokens[0])"), HTTPHeader("apns-push-type", "alert"), HTTPHeader("apns-topic", bundle)],
            body: Array(#"{"aps":{}}"#.utf8))
        #expect(answer(engine.handle(request)).status == 200)
        clock.withLock { $0 = now + 3600 }
        #expect(answer(engine.handle(request)).status == 200)
        clock.withLock { $0 = now + 3601 }
        #expect(answer(engine.handle(request)) == (403, "ExpiredProviderToken"))
        clock.withLock { $0 = now - 301 }
        #expect(answer(engine.handle(request)) == (403, "InvalidProviderToken"))
    }

    @Test("through the engine: a combining mark after a slash is BadPath, a duplicate among many headers is DuplicateHeaders")
    func engine() throws {
        let mock = try MockFixture()
        #expect(answer(mock.send(path: "/3/device/\u{301}\(token64)")) == (404, "BadPath"))
        var many = [HTTPHeader("apns-push-type", "alert"), HTTPHeader("apns-topic", bundle)]
        many += (0..<20).map { HTTPHeader("x-extra-\($0)", "v") }
        #expect(answer(mock.send(headers: many)).status == 200)
        #expect(answer(mock.send(headers: many + [HTTPHeader("x-extra-3", "w")])) == (400, "DuplicateHeaders"))
        #expect(answer(mock.send(authorization: "BEARER \(mock.validToken)")).status == 200)
        #expect(answer(mock.send(authorization: "bearer\(mock.validToken)")) == (403, "InvalidProviderToken"))
    }
}
