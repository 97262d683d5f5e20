import RelayJSON

/// What ties a send's intent to its completion in the journal: one logical
/// send is one apns-id started at one instant. On disk it is ``bytes``,
/// `apns-id/started-at`, the one definition of that text: an intent's
/// `unknown` row id derives from it (``AuditRecord/derivedID(_:)``), so a
/// journal left by one build recovers with the same ids in the next.
///
/// The writer's ledger of open intents keys on the two values themselves:
/// two per send, on the sending thread, where building the text (a string
/// interpolation and an allocation) cost more than the lookups it served.
struct AuditJournalKey: Hashable {
    var apnsID: String
    var startedAt: UInt64

    /// The start (nanoseconds: two sends rarely share one) and the apns-id's
    /// length, not its 36 bytes: the ledger hashes a key twice per send, and
    /// SipHash over the string was most of each lookup. Equality still
    /// compares both values in full.
    func hash(into hasher: inout Hasher) {
        hasher.combine(startedAt)
        hasher.combine(apnsID.utf8.count)
    }

    /// The key's text, `apns-id/started-at` (the start in decimal nanoseconds).
    var bytes: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(apnsID.utf8.count + 21)
        append(to: &bytes)
        return bytes
    }

    /// ``bytes`` as a `String`, for what is not on the journal's path
    /// (``AuditRecord/init(intent:startedAt:relayInstance:)``, tests).
    var text: String { String(decoding: bytes, as: UTF8.self) }

    /// Appends ``bytes`` to `text`.
    func append(to text: inout [UInt8]) {
        text.append(contentsOf: apnsID.utf8)
        text.append(UInt8(ascii: "/"))
        DecimalDigits.append(startedAt, to: &text)
    }
}
