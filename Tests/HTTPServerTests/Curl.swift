import Foundation
import Testing

/// Runs the system `curl`, an HTTP client nobody here wrote.
struct Curl {
    struct Result {
        var status: Int
        var headers: [String: String]
        var body: String
    }

    static func run(_ arguments: [String]) async throws -> (output: String, exitCode: Int32) {
        try await withCheckedThrowingContinuation { continuation in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["curl", "--silent", "--show-error", "--no-progress-meter"] + arguments
            let output = Pipe()
            process.standardOutput = output
            process.standardError = output
            process.terminationHandler = { finished in
                let data = output.fileHandleForReading.readDataToEndOfFile()
                continuation.resume(returning: (String(decoding: data, as: UTF8.self), finished.terminationStatus))
            }
            do { try process.run() } catch { continuation.resume(throwing: error) }
        }
    }

    /// One request; parses status, headers (lowercased) and body.
    static func request(_ url: String, _ extra: [String] = []) async throws -> Result {
        let (output, code) = try await run(["--include"] + extra + [url])
        try #require(code == 0, "curl failed (\(code)): \(output)")
        let parts = output.components(separatedBy: "\r\n\r\n")
        let head = parts[0].components(separatedBy: "\r\n")
        let status = Int(head[0].split(separator: " ")[1]) ?? 0
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return Result(status: status, headers: headers, body: parts.dropFirst().joined(separator: "\r\n\r\n"))
    }
}
