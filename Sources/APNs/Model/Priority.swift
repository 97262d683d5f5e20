/// The `apns-priority` header.
public enum Priority: Int, Sendable, Hashable, CaseIterable, Codable, Comparable {
    /// Deliver when the device is awake anyway; may be grouped and delayed.
    case low = 1
    /// Deliver at a time that conserves the device's power. No Live Activity budget.
    case conservePower = 5
    /// Deliver now. Budgeted by iOS for Live Activities (MS015).
    case immediate = 10

    public static func < (lhs: Priority, rhs: Priority) -> Bool { lhs.rawValue < rhs.rawValue }
}
