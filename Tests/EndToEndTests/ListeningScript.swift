import Foundation
import Synchronization
import TestSupport

/// A script of scripts/lib run by python3 as an independent peer that prints
/// `prefix` followed by its port once it listens: the child and that port.
/// `failure` says what went wrong when it exits or stays silent for 30 s.
func startListeningScript(_ script: String, _ arguments: [String], portAfter prefix: String, failure: String) async throws -> (child: ChildProcess, port: UInt16) {
    let path = TraceExportProcessTests.root.appendingPathComponent("scripts/lib/\(script)").path
    let child = try ChildProcess(["python3", path] + arguments, standardOutput: .pipe, standardError: .inherit)
    let lines = Mutex<[String]>([])
    ChildProcess.collectLines(of: child.standardOutput!) { line in lines.withLock { $0.append(line) } }
    var found: UInt16?
    _ = await eventually(30) {
        found = lines.withLock { $0 }.first { $0.hasPrefix(prefix) }.flatMap { UInt16($0.dropFirst(prefix.count)) }
        return found != nil || child.exitStatus != nil
    }
    guard let found else { throw TestRelayError("\(failure) (exit \(String(describing: child.exitStatus)))") }
    return (child, found)
}
