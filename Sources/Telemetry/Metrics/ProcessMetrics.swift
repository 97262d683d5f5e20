import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The standard `process_*` metrics, read from /proc/self.
enum ProcessMetrics {
    /// CPU seconds already added to the counter (counters only go up).
    static let cpuSeconds = Mutex<Double>(0)

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
        return bootTime + ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }()

    static func update(_ metrics: RelayMetrics) {
        let pageSize = Double(sysconf(Int32(_SC_PAGESIZE)))
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
            let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
            let cpu = ((Double(fields[11]) ?? 0) + (Double(fields[12]) ?? 0)) / ticks
            let counter = metrics.counter(MetricCatalog.cpuSecondsTotal)
            cpuSeconds.withLock { last in
                if cpu > last { counter.increment(by: cpu - last) }
                last = max(last, cpu)
            }
            metrics.gauge(MetricCatalog.threads).set(to: Double(fields[17]) ?? 0)
        }
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
        metrics.gauge(MetricCatalog.openFDs).set(to: Double(fds))
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        metrics.gauge(MetricCatalog.maxFDs).set(to: Double(limit.rlim_cur))
        metrics.gauge(MetricCatalog.startTime).set(to: startTime)
    }
}
