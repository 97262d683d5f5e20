import Foundation
import TestSupport
import Testing

/// Keys made by the `openssl` command line in a private temp directory.
struct KeyFiles {
    let directory: String

    init() throws {
        directory = NSTemporaryDirectory() + "apns-relay-keys-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    func path(_ name: String) -> String { directory + "/" + name }

    /// Runs a command, failing the test with its output when it fails.
    @discardableResult
    static func run(_ arguments: [String], input: Data? = nil) throws -> String {
        let (status, text) = try runReturningStatus(arguments, input: input)
        try #require(status == 0, "\(arguments.joined(separator: " ")) failed: \(text)")
        return text
    }

    /// Runs a command and returns its exit status and output, whatever they are.
    static func runReturningStatus(_ arguments: [String], input: Data? = nil) throws -> (Int32, String) {
        try ProcessRunner.run(arguments, input: input)
    }

    /// `openssl genpkey` with `options`, written as PKCS#8 PEM with `mode`.
    func generate(_ name: String, options: [String], mode: Int = 0o600) throws -> String {
        let file = path(name)
        try Self.run(["openssl", "genpkey"] + options + ["-out", file])
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: file)
        return file
    }

    func p256(_ name: String = "AuthKey_TEST.p8", mode: Int = 0o600) throws -> String {
        try generate(name, options: ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"], mode: mode)
    }

    func write(_ name: String, _ text: String, mode: Int = 0o600) throws -> String {
        let file = path(name)
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: file)
        return file
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }
}
