/// Waits until `condition` holds, checking it every `interval` (20 ms unless
/// told), and says whether it did: the verdict is the condition's, the
/// `timeout` (seconds) only ends a hung test.
///
/// The budget counts only time this task got to run: each gap between two
/// checks is charged at most 20 ms. On two cores other suites can hold the
/// cooperative pool for half a minute (psql, promtool, openssl, h2load…); a
/// wall-clock deadline would expire while the awaited event is merely
/// waiting for a thread, failing the check made the moment both resume.
/// A cancelled task stops waiting at once.
public func eventually(
    _ timeout: Double = 20, every interval: Duration = .milliseconds(20), _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let clock = ContinuousClock()
    var charged = Duration.zero
    let budget = Duration.milliseconds(Int(timeout * 1000))
    var last = clock.now
    while charged < budget, !Task.isCancelled {
        if try await condition() { return true }
        try? await Task.sleep(for: interval)
        let now = clock.now
        charged += min(last.duration(to: now), .milliseconds(20))
        last = now
    }
    return try await condition()
}
