import Foundation
import Synchronization
import TestSupport

/// `apns-relay serve` as a child process: started from a YAML file, read
/// for the line that names its ports, signalled like an init system would.
final class RelayProcess: Sendable {
    /// What the reader thread and the termination handler report.
    private final class Observed: Sendable {
        let lines = Mutex<[String]>([])
        let exit = Mutex<Int32?>(nil)
    }

    private let process: Process
    private let observed = Observed()

    /// The built `apns-relay` next to the test bundle (the same build).
    static var binary: String {
        if let path = ProcessInfo.processInfo.environment["APNS_RELAY_BINARY"] { return path }
        let beside = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("apns-relay").path
        if FileManager.default.isExecutableFile(atPath: beside) { return beside }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/apns-relay").path
    }

    /// - Parameter standardError: a file to write the child's standard error (its JSON logs) to.
    init(arguments: [String], environment: [String: String] = [:], standardError: String? = nil) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = arguments
        var merged = ProcessInfo.processInfo.environment
        for (name, value) in environment { merged[name] = value }
        process.environment = merged
        let output = Pipe()
        process.standardOutput = output
        if let standardError {
            FileManager.default.createFile(atPath: standardError, contents: nil)
            process.standardError = FileHandle(forWritingAtPath: standardError)
        } else {
            process.standardError = FileHandle.nullDevice
        }
        process.terminationHandler = { [observed] finished in observed.exit.withLock { $0 = finished.terminationStatus } }
        try process.run()
        Self.collectLines(of: output.fileHandleForReading) { [observed] line in observed.lines.withLock { $0.append(line) } }
    }

    /// Hands each line `handle` yields to `onLine`, on a thread of its own
    /// (a blocking read must not hold the cooperative pool), until EOF.
    static func collectLines(of handle: FileHandle, onLine: @escaping @Sendable (String) -> Void) {
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

    var output: [String] { observed.lines.withLock { $0 } }
    var exitStatus: Int32? { observed.exit.withLock { $0 } }

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

    func signal(_ number: Int32) { kill(process.processIdentifier, number) }

    /// Waits for the process to exit and returns its status.
    func waitForExit(timeout: Double = 60) async -> Int32? {
        _ = await eventually(timeout) { exitStatus != nil }
        return exitStatus
    }
}
