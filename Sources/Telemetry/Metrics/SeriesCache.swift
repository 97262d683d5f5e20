import Synchronization

/// The series of one metric already made, by label set: a dictionary
/// lookup instead of swift-prometheus' `make…` on every recording. (The
/// key may also be a cheaper stand-in for a label set, as
/// ``IngressSeriesKey`` is for an answered request's two metrics.)
///
/// Each cache is bound to its metric when it is made (``RelayMetrics``), so a
/// recording names only its labels and cannot reach another metric's
/// series. The registry hands out one series object per name and label set,
/// so the kept object is the very one a scrape reads: counts stay exact.
/// Series are never unregistered in the relay, so a kept one never goes stale.
final class SeriesCache<Labels: Hashable & Sendable, Series: AnyObject & Sendable>: Sendable {
    private let made = Mutex<[Labels: Series]>([:])
    private let make: @Sendable (Labels) -> Series

    /// - Parameter make: the registry's series of this cache's metric for a label set.
    init(make: @escaping @Sendable (Labels) -> Series) {
        self.make = make
    }

    /// The series for `labels`, made the first time.
    func series(_ labels: Labels) -> Series {
        if let series = made.withLock({ $0[labels] }) { return series }
        // Made outside the lock (the registry takes its own); a race makes
        // the same object twice over, which the registry deduplicates.
        let series = make(labels)
        made.withLock { $0[labels] = series }
        return series
    }
}
