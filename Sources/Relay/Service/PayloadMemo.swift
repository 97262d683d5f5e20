import APNs
import Surfaces

/// The alert or notification payload of the last snapshot a run of sends
/// projected, checked and encoded once (``EncodedPayload``): the sends a
/// batch starts together mostly carry one snapshot (a fan-out's tokens, or
/// items repeating it), and each would otherwise project the same snapshot
/// and encode the same JSON. Used by one ``RelayService/startSends(_:context:)``
/// call, on one task.
final class PayloadMemo {
    enum Kind { case alert, notification }

    private var last: (kind: Kind, snapshot: LiveSurfaceSnapshot, payload: EncodedPayload)?

    /// The snapshot's payload of `kind`, encoded; nil when projecting or
    /// checking it fails: the send then takes the ordinary path, which
    /// refuses it with the error it always gave, in the same order of checks.
    func payload(_ kind: Kind, of snapshot: LiveSurfaceSnapshot) -> EncodedPayload? {
        // Repeated items share the decoder's snapshot storage, so this
        // comparison mostly finds identical buffers and returns early.
        if let last, last.kind == kind, last.snapshot == snapshot { return last.payload }
        let projected = switch kind {
        case .alert: try? snapshot.alertPayload()
        case .notification: try? snapshot.notificationPayload()
        }
        guard let projected, let payload = try? EncodedPayload(projected) else { return nil }
        last = (kind, snapshot, payload)
        return payload
    }
}
