@testable import Relay
import Testing

/// A refused send's audit row keeps a bounded prefix of what the caller sent
/// (issue 27: a 900 KB snapshot id was stored whole).
@Suite("Refused sends keep a bounded prefix")
struct AuditPrefixTests {
    @Test("identifiers over 256 bytes are cut on a character boundary; shorter ones kept whole")
    func prefix() {
        #expect(RelayService.auditPrefix("short-id") == "short-id")
        let exact = String(repeating: "a", count: RelayService.auditPrefixBytes)
        #expect(RelayService.auditPrefix(exact) == exact)
        let huge = String(repeating: "x", count: 900_000)
        #expect(RelayService.auditPrefix(huge).utf8.count == RelayService.auditPrefixBytes)
        // 255 ASCII bytes then a 4-byte scalar: the scalar does not fit and is left out whole.
        let straddling = String(repeating: "b", count: 255) + "😀" + String(repeating: "c", count: 1000)
        let cut = RelayService.auditPrefix(straddling)
        #expect(cut == String(repeating: "b", count: 255))
        #expect(straddling.hasPrefix(cut))
    }
}
