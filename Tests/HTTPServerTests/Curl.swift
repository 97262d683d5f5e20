import Foundation
import Testing
import TestSupport

/// Runs the system `curl`, an HTTP client nobody here wrote.
struct Curl {
    struct Result {
        var status: Int
        var headers: [String: String]
        var body: String
    }

    static func run(_ arguments: [String]) async throws -> (output: String, exitCode: Int32) {
        let (status, output) = try await ProcessRunner.runOffPool(["curl", "--silent", "--show-error", "--no-progress-meter"] + arguments)
        return (output, status)
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
