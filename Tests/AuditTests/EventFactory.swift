import APNs
import Relay

/// Synthetic finished sends for writer tests: deterministic, varied, and with
/// the awkward characters COPY must escape.
enum EventFactory {
    static let base: UInt64 = 1_763_800_000_000_000_000  // 2025-11-22

    static func event(_ index: Int, dead: Bool = false) -> SendEvent {
        let id = APNsID.random()
        let token = String(format: "%064x", index)
        let descriptor = SendDescriptor(
            app: index % 2 == 0 ? "alpha" : "beta", environment: .production,
            operation: index % 3 == 0 ? .update : .alert, apnsID: id, pushType: index % 3 == 0 ? .liveactivity : .alert,
            priority: index % 3 == 0 ? .conservePower : .immediate, topic: "com.example.app",
            tokenFingerprint: Fingerprint.of(token), snapshotID: "snap\t\(index)\n\\x", surfaceID: "surface-\(index % 10)",
            payloadBytes: 100 + index % 900, caller: "backend-\(index % 4)", traceID: String(format: "%032x", index))
        let finished = base + UInt64(index) * 1_000_000
        let retried = index % 5 == 0
        return SendEvent(
            send: descriptor, outcome: dead ? .rejected : .success, status: dead ? 410 : 200,
            reason: dead ? "Unregistered" : nil, errorType: dead ? "Unregistered" : nil, attempts: retried ? 2 : 1,
            trapHits: dead ? [.deadToken] : (retried ? [.tooManyRequests] : []), latencySeconds: Double(index % 100) / 1000,
            startedAt: finished - 5_000_000, finishedAt: finished, apnsUniqueID: dead ? nil : APNsID.random().value,
            unregisteredAt: dead ? 1_763_700_000_000 : nil, dropsToken: dead,
            attemptLog: (retried ? [AttemptSummary(status: 429, reason: "TooManyRequests", durationSeconds: 0.004)] : [])
                + [AttemptSummary(status: dead ? 410 : 200, reason: dead ? "Unregistered" : nil, durationSeconds: 0.003)],
            deadToken: dead ? DeadToken(token: token, fingerprint: Fingerprint.of(token), reason: "Unregistered", apnsTimestampMilliseconds: 1_763_700_000_000) : nil)
    }
}
