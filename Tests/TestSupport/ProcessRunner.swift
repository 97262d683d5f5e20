public import Foundation

/// Runs the command-line tools tests use as independent implementations
/// (openssl, psql, promtool, curl, python3) and returns what they said.
public enum ProcessRunner {
    /// Runs `arguments` through /usr/bin/env, feeding `input` on stdin.
    /// Returns the exit status and stdout+stderr; never throws for a
    /// non-zero status, so callers can assert on failures too.
    public static func run(_ arguments: [String], input: Data? = nil) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        let stdin = Pipe()
        if input != nil { process.standardInput = stdin }
        try process.run()
        if let input {
            stdin.fileHandleForWriting.write(input)
            try stdin.fileHandleForWriting.close()
        }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}

extension ProcessRunner {
    /// ``run(_:input:)`` on a thread of its own: waiting for a child process
    /// must not hold one of the two cooperative threads that in-process
    /// servers under test need to answer it. Not a Dispatch global queue
    /// either: on Linux its width is the core count, and Foundation's Process
    /// learns of a child's exit through Dispatch, so blocking those threads
    /// on children starves the very notification they wait for.
    public static func runOffPool(_ arguments: [String], input: Data? = nil) async throws -> (status: Int32, output: String) {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                continuation.resume(with: Result { try run(arguments, input: input) })
            }
            thread.start()
        }
    }
}
