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
