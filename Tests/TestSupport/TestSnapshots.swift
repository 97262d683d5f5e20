/// LiveSurfaceSnapshot v5 bodies as JSON text, for tests that build request
/// bodies: the end-to-end tests (through `TestRelay`) and the ingress
/// decoding tests share them, so a schema change is made here once.
public enum TestSnapshots {
    /// An active Live Activity with every optional field the projections read.
    public static let liveActivity = #"{"schemaVersion":"5","kind":"liveActivity","id":"e2e-1","surfaceId":"surface-e2e","updatedAt":"2026-11-22T10:00:00Z","state":"active","liveActivity":{"title":"Order on its way","body":"4 stops away","progress":0.4,"deepLink":"e2e://orders/1","modeLabel":"active","contextLabel":"delivery","statusLine":"active · 40%","actionLabel":"Track","stage":"inProgress","estimatedSeconds":900,"morePartsCount":0}}"#
    /// A notification asking for attention.
    public static let notification = #"{"schemaVersion":"5","kind":"notification","id":"e2e-n","surfaceId":"surface-e2e","updatedAt":"2026-11-22T10:00:00Z","state":"attention","notification":{"title":"Shipped","body":"Track it","deepLink":"e2e://orders/1","category":"surface-update","threadId":"t1"}}"#
}
