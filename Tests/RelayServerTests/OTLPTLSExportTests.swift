import Foundation
import HTTP2
import Logging
@testable import RelayServer
import Synchronization
import Telemetry
import Testing
import TestSupport
import Tracing

/// `https://` collectors: the exporter's TLS (HTTP2's OpenSSL fence, ALPN
/// http/1.1) against otlp_receiver.py behind Python's ssl module.
@Suite("OTLP export over TLS")
struct OTLPTLSExportTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    struct ReceiverError: Error {}

    static func tlsReceiver(file: String, certificate: SelfSignedCertificate) async throws -> (child: ChildProcess, port: UInt16) {
        let script = root.appendingPathComponent("scripts/lib/otlp_receiver.py").path
        let child = try ChildProcess(
            ["python3", script, file, "--tls", certificate.certificateFile, certificate.privateKeyFile], standardOutput: .pipe,
            standardError: .inherit)
        let lines = Mutex<[String]>([])
        ChildProcess.collectLines(of: child.standardOutput!) { line in lines.withLock { $0.append(line) } }
        let prefix = "otlp-receiver on "
        var port: UInt16?
        _ = await eventually(30) {
            port = lines.withLock { $0 }.first { $0.hasPrefix(prefix) }.flatMap { UInt16($0.dropFirst(prefix.count)) }
            return port != nil || child.exitStatus != nil
        }
        guard let port else { throw ReceiverError() }
        return (child, port)
    }

    /// One span through RelayTracing with `environment`; the exporter's totals after its close.
    static func exportOne(_ environment: [String: String]) async throws -> OTLPExporter.Counts {
        var settings = ServerConfiguration.TracingSettings()
        settings.exporter = .otlp
        let tracing = try RelayTracing(
            settings: settings, instance: "tls-test", version: "test", logger: Logger(label: "tls") { _ in SwiftLogNoOpLogHandler() },
            environment: environment, dropped: { _, _ in })
        try tracing.start()
        let span = tracing.tracer.startSpan("apns.send", context: .topLevel, ofKind: .client)
        span.attributes["apns.id"] = "tls"
        span.end()
        await tracing.shutdown(within: 10)
        return try #require(tracing.exporter).counts
    }

    @Test("an https endpoint with OTEL_EXPORTER_OTLP_CERTIFICATE: the span arrives; without that CA the certificate is refused and the span counted as dropped")
    func httpsCollector() async throws {
        let directory = NSTemporaryDirectory() + "otlp-tls-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let certificate = try SelfSignedCertificate.generate(in: directory)
        let file = directory + "/spans.jsonl"
        let receiver = try await Self.tlsReceiver(file: file, certificate: certificate)
        defer { receiver.child.terminate() }
        let endpoint = "https://127.0.0.1:\(receiver.port)"

        let trusted = try await Self.exportOne([
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_CERTIFICATE": certificate.certificateFile,
            "OTEL_BSP_SCHEDULE_DELAY": "10",
        ])
        #expect(trusted.exported == 1 && trusted.dropped == 0, "\(trusted)")
        let text = try String(contentsOfFile: file, encoding: .utf8)
        #expect(text.contains(#""apns.id": "tls""#), "\(text)")

        // The system trust store does not know the test's certificate.
        let untrusted = try await Self.exportOne([
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_BSP_SCHEDULE_DELAY": "10", "OTEL_EXPORTER_OTLP_TIMEOUT": "2000",
        ])
        #expect(untrusted.exported == 0 && untrusted.droppedExportFailed == 1, "\(untrusted)")
    }
}
