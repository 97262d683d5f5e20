import Foundation
import RelayBasics
import Synchronization

/// The standard `process_*` metrics, read from /proc/self. One per
/// ``RelayMetrics``: each registry counts the CPU seconds it has already
/// added, so two registries in one process (tests, `demo`) never take each
/// other's share of the counter.
final class ProcessMetrics: Sendable {
    /// CPU seconds already added to this registry's counter (counters only go up).
    private let cpuSecondsAdded = Mutex<Double>(0)

    /// When the process started, unix seconds: read once per process.
    static let startTime: Double = {
        // /proc/self/stat field 22 is the start time in clock ticks since boot.
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")"),
              let uptime = try? String(contentsOfFile: "/proc/uptime", encoding: .utf8),
              let uptimeSeconds = Double(uptime.split(separator: " ")[0])
        else { return Date().timeIntervalSince1970 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        let ticks = Double(fields[19]) ?? 0
        let bootTime = Date().timeIntervalSince1970 - uptimeSeconds
        return bootTime + ticks / SystemInfo.clockTicksPerSecond
    }()

    func update(_ metrics: RelayMetrics) {
        let pageSize = SystemInfo.pageSize
        if let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) {
            let fields = statm.split(separator: " ").compactMap { Double($0) }
            if fields.count >= 2 {
                metrics.gauge(MetricCatalog.virtualMemory).set(to: fields[0] * pageSize)
                metrics.gauge(MetricCatalog.residentMemory).set(to: fields[1] * pageSize)
            }
        }
        if let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") {
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            // utime and stime are fields 14 and 15 (indexes 11 and 12 after the command name); threads is field 20.
            let cpu = ((Double(fields[11]) ?? 0) + (Double(fields[12]) ?? 0)) / SystemInfo.clockTicksPerSecond
            let counter = metrics.counter(MetricCatalog.cpuSecondsTotal)
            cpuSecondsAdded.withLock { last in
                if cpu > last { counter.increment(by: cpu - last) }
                last = max(last, cpu)
            }
            metrics.gauge(MetricCatalog.threads).set(to: Double(fields[17]) ?? 0)
        }
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
        metrics.gauge(MetricCatalog.openFDs).set(to: Double(fds))
        if let limit = SystemInfo.openFileSoftLimit { metrics.gauge(MetricCatalog.maxFDs).set(to: limit) }
        metrics.gauge(MetricCatalog.startTime).set(to: Self.startTime)
    }
}
