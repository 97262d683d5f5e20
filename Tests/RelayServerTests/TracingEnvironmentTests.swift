@testable import RelayServer
import Testing

/// `OTEL_TRACES_EXPORTER` and `OTEL_SDK_DISABLED` over `tracing.exporter`,
/// as the OpenTelemetry specification's SDK environment variables define them.
@Suite("OpenTelemetry exporter variables")
struct TracingEnvironmentTests {
    typealias Exporter = ServerConfiguration.TracingSettings.Exporter

    static func resolve(file: Exporter?, _ environment: [String: String]) throws -> ServerConfiguration.TracingSettings {
        let yaml = TracingConfigurationTests.apps + (file.map { "tracing:\n  exporter: \($0.rawValue)\n" } ?? "")
        return try ServerConfiguration.parse(yaml: yaml, file: "/tmp/relay.yaml", environment: environment).tracing
    }

    @Test("OTEL_TRACES_EXPORTER wins over the file: otlp, console (the log exporter), none; any case, blanks trimmed")
    func exporterVariable() throws {
        for (value, expected) in [
            ("otlp", Exporter.otlp), ("OTLP", .otlp), (" otlp ", .otlp),
            ("console", .log), ("logging", .log), ("none", .none), ("None", .none),
        ] {
            for file in [nil, Exporter.log, .otlp, .none] {
                let tracing = try Self.resolve(file: file, ["OTEL_TRACES_EXPORTER": value])
                #expect(tracing.exporter == expected, "\(value) over \(String(describing: file))")
                #expect(tracing.exporterSource == .tracesExporter)
                #expect(tracing.environmentWarnings.isEmpty)
            }
        }
        // Unset and empty are alike: the file decides (log when it says nothing).
        for environment in [[:], ["OTEL_TRACES_EXPORTER": ""], ["OTEL_TRACES_EXPORTER": "  "]] {
            let tracing = try Self.resolve(file: .otlp, environment)
            #expect(tracing.exporter == .otlp && tracing.exporterSource == .file && tracing.environmentWarnings.isEmpty)
            #expect(try Self.resolve(file: nil, environment).exporter == .log)
        }
    }

    @Test("OTEL_SDK_DISABLED=true (any case) exports nothing, whatever the file and OTEL_TRACES_EXPORTER say")
    func sdkDisabled() throws {
        for value in ["true", "TRUE", "True"] {
            for file in [nil, Exporter.log, .otlp] {
                let tracing = try Self.resolve(file: file, ["OTEL_SDK_DISABLED": value, "OTEL_TRACES_EXPORTER": "otlp"])
                #expect(tracing.exporter == .none)
                #expect(tracing.exporterSource == .sdkDisabled)
            }
        }
        // false and empty change nothing, silently; anything else is false with a warning.
        for value in ["false", "FALSE", ""] {
            let tracing = try Self.resolve(file: .otlp, ["OTEL_SDK_DISABLED": value])
            #expect(tracing.exporter == .otlp && tracing.environmentWarnings.isEmpty)
        }
        for value in ["1", "yes", "on"] {
            let tracing = try Self.resolve(file: .otlp, ["OTEL_SDK_DISABLED": value])
            #expect(tracing.exporter == .otlp)
            #expect(tracing.environmentWarnings.count == 1)
            #expect(tracing.environmentWarnings.first?.contains("OTEL_SDK_DISABLED=\(value)") == true)
        }
    }

    @Test("an exporter the relay lacks is a warning and ignored; a list uses its first exporter and says so")
    func unsupportedAndLists() throws {
        for value in ["prometheus", "otlp_grpc", "zipkin"] {
            let tracing = try Self.resolve(file: .log, ["OTEL_TRACES_EXPORTER": value])
            #expect(tracing.exporter == .log && tracing.exporterSource == .file)
            #expect(tracing.environmentWarnings.count == 1)
            #expect(tracing.environmentWarnings.first?.contains("\(value) is not an exporter apns-relay has") == true)
        }
        let list = try Self.resolve(file: .none, ["OTEL_TRACES_EXPORTER": "zipkin, otlp,console"])
        #expect(list.exporter == .otlp && list.exporterSource == .tracesExporter)
        #expect(list.environmentWarnings.count == 2)
        #expect(list.environmentWarnings.contains { $0.contains("otlp is used, console ignored") })
        let same = try Self.resolve(file: .none, ["OTEL_TRACES_EXPORTER": "console,logging"])
        #expect(same.exporter == .log && same.environmentWarnings.isEmpty)
        // The check-config output says where the exporter came from and what was ignored.
        var configuration = try ServerConfiguration.parse(
            yaml: TracingConfigurationTests.apps, file: "/tmp/relay.yaml", environment: ["OTEL_TRACES_EXPORTER": "otlp,console"])
        #expect(configuration.maskedDescription.contains("exporter: otlp  # from OTEL_TRACES_EXPORTER"))
        #expect(configuration.maskedDescription.contains("# warning: OTEL_TRACES_EXPORTER=otlp,console"))
        configuration = try ServerConfiguration.parse(
            yaml: TracingConfigurationTests.apps, file: "/tmp/relay.yaml", environment: ["OTEL_SDK_DISABLED": "true"])
        #expect(configuration.maskedDescription.contains("exporter: none  # from OTEL_SDK_DISABLED"))
    }

    @Test("zipkin or jaeger beside an otlp file is a warning and ignored like any other: no SDK of someone else's reads the variable now")
    func zipkinBesideOTLPIsAWarning() throws {
        for value in ["zipkin", "Jaeger"] {
            let tracing = try Self.resolve(file: .otlp, ["OTEL_TRACES_EXPORTER": value])
            #expect(tracing.exporter == .otlp && tracing.exporterSource == .file)
            #expect(tracing.environmentWarnings.first?.contains("\(value.lowercased()) is not an exporter apns-relay has") == true)
        }
    }
}
