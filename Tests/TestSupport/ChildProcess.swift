public import Foundation

/// A command-line tool or server started by a test: spawned with only the
/// standard descriptors it is given (nothing else the test process holds
/// open, such as a server's listening socket or another child's pipe, is
/// inherited), signalled, and waited for without holding a cooperative thread.
///
/// One-shot commands go through ``ProcessRunner``; long-running ones (a
/// server, a client killed mid-request, the relay itself) are started here and
/// stopped with ``terminate()`` / ``kill()`` and ``exited()``.
public final class ChildProcess: Sendable {
    /// Where one of the child's output streams goes.
    public enum Output: Sendable {
        /// `/dev/null`.
        case discard
        /// A pipe whose read end is ``standardOutput`` or ``standardError``.
        case pipe
        /// This process's own descriptor (the test log).
        case inherit
        /// Created or truncated, then written by the child.
        case file(String)
        /// Standard error only: the same pipe or file as standard output.
        case sameAsStandardOutput
    }

    /// The child's process id.
    public let pid: Int32
    /// The write end of the child's standard input when started with `input: true`
    /// (otherwise its standard input is `/dev/null`). Closing it is the child's EOF.
    public let standardInput: FileHandle?
    /// The read end of standard output when it is ``Output/pipe``.
    public let standardOutput: FileHandle?
    /// The read end of standard error when it is ``Output/pipe``.
    public let standardError: FileHandle?
    let exit: ExitState

    /// Starts `arguments[0]` (looked up in PATH unless it is a path) with the
    /// rest as its arguments.
    /// - Parameter environment: added to (or replacing entries of) this
    ///   process's environment.
    public init(
        _ arguments: [String], environment: [String: String] = [:], input: Bool = false,
        standardOutput: Output = .discard, standardError: Output = .discard
    ) throws {
        precondition(!arguments.isEmpty, "no command")
        if case .sameAsStandardOutput = standardOutput { preconditionFailure("standard output cannot follow itself") }
        var merged = ProcessInfo.processInfo.environment
        for (name, value) in environment { merged[name] = value }
        let spawned = try Self.spawn(
            arguments, environment: merged.map { "\($0.key)=\($0.value)" }, input: input,
            standardOutput: standardOutput, standardError: standardError)
        pid = spawned.pid
        standardInput = spawned.input
        self.standardOutput = spawned.output
        self.standardError = spawned.error
        exit = ExitState()
        Self.reap(pid, into: exit)
    }

    /// Sends `number` to the child (nothing when it has already been reaped).
    public func signal(_ number: Int32) {
        guard exitStatus == nil else { return }
        Self.send(number, to: pid)
    }

    /// SIGTERM.
    public func terminate() { signal(SIGTERM) }

    /// SIGKILL: the kernel closes the child's sockets, as for a crash.
    public func kill() { signal(SIGKILL) }

    /// The exit code, or the signal number for a child a signal ended
    /// (as Foundation's `terminationStatus`); nil while it runs.
    public var exitStatus: Int32? { exit.status }

    public var isRunning: Bool { exitStatus == nil }

    /// Suspends until the child exits; returns ``exitStatus``.
    public func exited() async -> Int32 { await exit.wait() }

    /// Blocks the calling thread until the child exits. Only for threads of
    /// one's own (never the cooperative pool).
    public func waitUntilExit() -> Int32 { exit.block() }

    /// Hands each line `handle` yields to `onLine`, on a thread of its own
    /// (a blocking read must not hold the cooperative pool), until EOF.
    public static func collectLines(of handle: FileHandle, onLine: @escaping @Sendable (String) -> Void) {
        let thread = Thread {
            var pending = ""
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                pending += String(decoding: data, as: UTF8.self)
                while let newline = pending.firstIndex(of: "\n") {
                    let line = String(pending[..<newline])
                    pending = String(pending[pending.index(after: newline)...])
                    onLine(line)
                }
            }
        }
        thread.start()
    }
}

/// The child's exit, published by its reaper thread to blocking and async waiters.
final class ExitState: @unchecked Sendable {
    // Every field is read and written under `condition`.
    private let condition = NSCondition()
    private var value: Int32?
    private var waiters: [CheckedContinuation<Int32, Never>] = []

    var status: Int32? {
        condition.lock()
        defer { condition.unlock() }
        return value
    }

    func publish(_ status: Int32) {
        condition.lock()
        value = status
        let resumed = waiters
        waiters = []
        condition.broadcast()
        condition.unlock()
        for waiter in resumed { waiter.resume(returning: status) }
    }

    func wait() async -> Int32 {
        await withCheckedContinuation { continuation in
            condition.lock()
            if let value {
                condition.unlock()
                continuation.resume(returning: value)
            } else {
                waiters.append(continuation)
                condition.unlock()
            }
        }
    }

    func block() -> Int32 {
        condition.lock()
        defer { condition.unlock() }
        while value == nil { condition.wait() }
        return value!
    }
}
