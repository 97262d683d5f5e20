@preconcurrency import Dispatch
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// Signals whose default action ends a process at once, sent to `serve`
/// by accident or by habit: SIGHUP (a closed terminal, logrotate's
/// `postrotate`, `systemctl reload`, `kill -HUP` for a reload the relay does
/// not have), SIGUSR1 and SIGUSR2. Left at their default, each one ended
/// `serve` without its drain: in-flight sends unanswered, the log's buffer
/// lost. `serve` ignores them and logs each one it receives, with what to do
/// instead. SIGTERM and SIGINT drain (its `ServiceGroup`); SIGQUIT still
/// dumps core, as an operator asking for one expects.
enum IgnoredSignals {
    static let all: [(number: Int32, name: String)] = [(SIGHUP, "SIGHUP"), (SIGUSR1, "SIGUSR1"), (SIGUSR2, "SIGUSR2")]

    /// Ignores the signals from now on and logs each one received, on a
    /// Dispatch queue (never the cooperative pool). Keep the sources for
    /// as long as the signals should be logged.
    static func install(logger: Logger) -> [any DispatchSourceSignal] {
        all.map { signalNumber, name in
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler {
                logger.warning(
                    "\(name) ignored: serve reads its configuration only at start, and logs only to standard error; SIGTERM drains it (restart to apply a change)",
                    metadata: ["signal": "\(name)"])
            }
            source.resume()
            return source
        }
    }
}
