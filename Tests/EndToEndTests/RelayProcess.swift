import Foundation
import Synchronization
import TestSupport

/// `apns-relay serve` as a child process: started from a YAML file, read
/// for the line that names its ports, signalled like an init system would.
final class RelayProcess: Sendable {
    /// The lines the reader thread collected.
    private final class Lines: Sendable {
        let lines = Mutex<[String]>([])
    }

    private let child: ChildProcess
    private let collected = Lines()

    /// The built `apns-relay` next to the test bundle (the same build).
    static var binary: String {
        if let path = ProcessInfo.processInfo.environment["APNS_RELAY_BINARY"] { return path }
        let beside = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("apns-relay").path
        if FileManager.default.isExecutableFile(atPath: beside) { return beside }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/apns-relay").path
    }

    /// - Parameter standardError: a file to write the child's standard error (its JSON logs) to.
    /// - Parameter standardErrorPipe: standard error into a pipe whose read end is ``standardErrorReader``
    ///   (a log collector the test plays, or stalls).
    /// - Parameter closing: standard descriptors (1, 2) closed before `serve` starts, as `2>&-` in a shell does.
    /// - Parameter outputReaderGone: standard output into a pipe whose read end is closed at once, as
    ///   `serve | head -1` leaves it once `head` has its line: every write to it fails (EPIPE).
    /// - Parameter openFileLimit: the child's soft and hard RLIMIT_NOFILE (util-linux `prlimit`, which
    ///   sets it and then runs the relay in its own process), as a container's `ulimit -n` would.
    /// - Parameter user: a user id to run the relay as (util-linux `setpriv`, without supplementary groups
    ///   or capabilities), for limits the kernel does not hold root to (RLIMIT_NPROC).
    /// - Parameter binary: the `apns-relay` to run (one that `user` can reach).
    init(
        arguments: [String], environment: [String: String] = [:], standardError: String? = nil, standardErrorPipe: Bool = false,
        closing: [Int32] = [], outputReaderGone: Bool = false, openFileLimit: Int? = nil, user: Int32? = nil, binary: String = RelayProcess.binary
    ) throws {
        var command = closing.isEmpty
            ? [binary] + arguments
            : ["/bin/sh", "-c", "exec \"$0\" \"$@\"" + closing.map { " \($0)>&-" }.joined(), binary] + arguments
        if let user { command = ["setpriv", "--reuid=\(user)", "--regid=\(user)", "--clear-groups", "--"] + command }
        if let openFileLimit { command = ["prlimit", "--nofile=\(openFileLimit):\(openFileLimit)", "--"] + command }
        child = try ChildProcess(
            command, environment: environment, standardOutput: .pipe,
            standardError: standardErrorPipe ? .pipe : standardError.map { .file($0) } ?? .discard)
        if outputReaderGone {
            try child.standardOutput!.close()
        } else {
            ChildProcess.collectLines(of: child.standardOutput!) { [collected] line in collected.lines.withLock { $0.append(line) } }
        }
    }

    var output: [String] { collected.lines.withLock { $0 } }
    /// The read end of standard error's pipe (`standardErrorPipe: true`).
    var standardErrorReader: FileHandle? { child.standardError }
    var exitStatus: Int32? { child.exitStatus }
    /// The child's process id (for /proc/<pid>/status).
    var pid: Int32 { child.pid }

    /// The port printed on the line starting with `prefix` ("apns-relay ingress on http://127.0.0.1:PORT").
    func port(after prefix: String, timeout: Double = 30) async throws -> UInt16 {
        var found: UInt16?
        _ = await eventually(timeout) {
            found = output.first { $0.hasPrefix(prefix) }.flatMap { line in
                line.split(separator: ":").last.flatMap { UInt16($0.split(separator: "/").first ?? "") }
            }
            return found != nil || exitStatus != nil
        }
        guard let found else { throw TestRelayError("no '\(prefix)' line; exit \(String(describing: exitStatus)); output: \(output)") }
        return found
    }

    func signal(_ number: Int32) { child.signal(number) }

    /// Waits for the process to exit and returns its status.
    func waitForExit(timeout: Double = 60) async -> Int32? {
        _ = await eventually(timeout) { exitStatus != nil }
        return exitStatus
    }
}
