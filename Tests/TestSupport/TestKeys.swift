import Foundation

/// A P-256 `.p8` key made by the `openssl` command line, mode 0600.
public struct TestKeyFile: Sendable {
    public let directory: String
    public let path: String

    public init() throws {
        directory = NSTemporaryDirectory() + "apns-relay-e2e-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        path = directory + "/AuthKey_E2E.p8"
        let (status, output) = try ProcessRunner.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path])
        guard status == 0 else { throw SignerError(description: "openssl genpkey failed: \(output)") }
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
    }

    public func remove() { try? FileManager.default.removeItem(atPath: directory) }
}
