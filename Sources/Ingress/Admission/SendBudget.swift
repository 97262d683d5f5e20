import Synchronization

/// Sends admitted and not yet finished, across every request of the relay
/// (`ingress.max_sends_in_flight`).
///
/// A single send takes one unit before it starts; a batch takes all of its
/// sends at once, when it is admitted, and gives each back as that send ends
/// (finished, or answered not sent). What a batch holds in memory grows with
/// its sends, so bounding admitted sends bounds the memory of the work the
/// relay has promised to do, not only the streams open to APNs.
///
/// Batches may fill only ``batchLimit`` (90 %): the last tenth is kept for
/// single sends, which then still get through while batches hold the rest.
final class SendBudget: Sendable {
    let limit: Int
    /// What all batches together may hold.
    let batchLimit: Int
    private let used = Atomic<Int>(0)

    init(limit: Int) {
        self.limit = max(1, limit)
        batchLimit = max(1, self.limit - self.limit / 10)
    }

    /// Takes `count` units if they all fit under the limit (``batchLimit``
    /// for a batch); nothing otherwise.
    func admit(_ count: Int, batch: Bool = false) -> Bool {
        let ceiling = batch ? batchLimit : limit
        var current = used.load(ordering: .relaxed)
        while true {
            guard current + count <= ceiling else { return false }
            let (exchanged, original) = used.compareExchange(
                expected: current, desired: current + count, ordering: .acquiringAndReleasing)
            if exchanged { return true }
            current = original
        }
    }

    func release(_ count: Int) {
        guard count > 0 else { return }
        used.subtract(count, ordering: .acquiringAndReleasing)
    }

    /// Units held now.
    var inUse: Int { used.load(ordering: .relaxed) }
}
