@preconcurrency import Dispatch

#if canImport(Glibc)
    import Glibc
#endif

/// Waits for SIGINT or SIGTERM without blocking a thread: `mock-apns` and
/// `demo --serve`. `serve` drains on them through its parts' ServiceGroup
/// (`RelayServer.start(_:drainingOnSignals: true)`).
enum SignalWaiter {
    static func waitForTermination() async -> Int32 {
        let (stream, continuation) = AsyncStream<Int32>.makeStream()
        var sources: [any DispatchSourceSignal] = []
        for signalNumber in [SIGINT, SIGTERM] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler { continuation.yield(signalNumber) }
            source.resume()
            sources.append(source)
        }
        var received = SIGTERM
        for await signalNumber in stream {
            received = signalNumber
            break
        }
        sources.forEach { $0.cancel() }
        return received
    }
}
