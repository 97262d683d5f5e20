import APNs
import Foundation
import Synchronization
import TestSupport

/// APNs device sends over HTTP/2 from httpx (scripts/lib/h2_apns_load.py),
/// many streams on a few connections, each with an `apns-id` of its own
/// (the relay's idempotency key) and a token derived from it: the fault
/// tests' load on the HTTP/2 APNs ingress, read line by line as it runs.
final class H2LoadDriver: Sendable {
    enum Mode {
        /// This many new sends, then exit.
        case count(Int)
        /// New sends until ``stop()``.
        case untilStopped
        /// Each of these apns-ids once more (same token and payload), then exit.
        case repeating([String])
    }

    private final class Collected: Sendable {
        let lines = Mutex<[String]>([])
    }

    private let child: ChildProcess
    private let collected = Collected()

    /// Starts the driver against cleartext h2 on `127.0.0.1:port`, `bearer` the provider token.
    /// `unkeyed`: no `apns-id` on the sends (no idempotency key); `answered`
    /// then holds the apns-ids the relay answered, the other lines the ids
    /// the tokens were made from (``token(of:)``).
    ///
    /// `tls`: TLS (ALPN h2) trusting `ca`, presenting the client certificate
    /// `certificate` with its `key` when given; nil: cleartext h2. `bearer`
    /// nil: no provider token (the certificate stands for the API key).
    init(
        port: UInt16, bearer: String?, streams: Int, mode: Mode, tokenPrefix: String = "", unkeyed: Bool = false,
        tls: (ca: String, certificate: String, key: String)? = nil
    ) throws {
        let script = TraceExportProcessTests.root.appendingPathComponent("scripts/lib/h2_apns_load.py").path
        var arguments = ["python3", script, "--port", String(port), "--topic", "com.example.a", "--streams", String(streams)]
        if let bearer { arguments += ["--bearer", bearer] }
        if let tls { arguments += ["--ca-file", tls.ca, "--cert", tls.certificate, "--key", tls.key] }
        if !tokenPrefix.isEmpty { arguments += ["--token-prefix", tokenPrefix] }
        if unkeyed { arguments += ["--no-apns-id"] }
        switch mode {
        case .count(let count): arguments += ["--count", String(count)]
        case .untilStopped: arguments += ["--until-input"]
        case .repeating: arguments += ["--repeat"]
        }
        let input: Bool = if case .count = mode { false } else { true }
        child = try ChildProcess(arguments, input: input, standardOutput: .pipe, standardError: .inherit)
        ChildProcess.collectLines(of: child.standardOutput!) { [collected] line in collected.lines.withLock { $0.append(line) } }
        if case .repeating(let ids) = mode {
            try child.standardInput?.write(contentsOf: Data(ids.map { $0 + "\n" }.joined().utf8))
            try child.standardInput?.close()
        }
    }

    var lines: [String] { collected.lines.withLock { $0 } }
    var isRunning: Bool { child.isRunning }
    var exitStatus: Int32? { child.exitStatus }

    /// The apns-ids sent (the request may or may not have reached the relay).
    var sent: [String] { field(1, of: "SENT ") }
    /// The apns-ids answered 200.
    var answered: [String] { field(1, of: "OK ") }
    /// The apns-ids answered 200 from the first send's answer (`idempotency-replayed: true`).
    var replayed: [String] { lines.filter { $0.hasPrefix("OK ") && $0.hasSuffix(" true") }.map { String($0.split(separator: " ")[1]) } }
    /// Other answers: `(status, apns-id, reason, retry-after)`.
    var refusals: [(status: Int, id: String, reason: String, retryAfter: String)] {
        lines.filter { $0.hasPrefix("STATUS ") }.compactMap { line in
            let parts = line.split(separator: " ").map(String.init)
            guard parts.count == 5, let status = Int(parts[1]) else { return nil }
            return (status, parts[2], parts[3], parts[4])
        }
    }
    /// Sends that got no answer (the connection died).
    var unanswered: [String] { field(1, of: "ERR ") }

    private func field(_ index: Int, of prefix: String) -> [String] {
        lines.filter { $0.hasPrefix(prefix) }.map { String($0.split(separator: " ")[index]) }
    }

    /// The device token a send of `id` went to (the script's derivation, without a prefix).
    static func token(of id: String) -> String { Fingerprint.sha256Hex(Array(id.utf8)) }

    /// Closes the driver's input (``Mode/untilStopped``): every stream stops after its current send.
    func stop() throws { try child.standardInput?.close() }

    /// Waits for the driver to exit.
    func finished(timeout: Double = 120) async -> Bool {
        await eventually(timeout) { !self.isRunning }
    }
}
