@testable import RelayServer
import Telemetry
import Testing

/// The `tracing:` block, and the OTLP exporter's settings with the `OTEL_*` variables over it.
@Suite("Tracing configuration and the OTLP exporter's settings")
struct TracingConfigurationTests {
    /// The least a configuration file must hold (one app, one API key).
    static let apps = ConfigurationTests.apps

    @Test("tracing: read, range-checked, shown; log is the default")
    func tracingBlock() throws {
        #expect(ServerConfiguration(instance: "x").tracing.exporter == .log)
        let yaml = Self.apps + """
            tracing:
              exporter: otlp
              endpoint: http://collector:4318
              sampling: {ratio: 0.25, parent_based: false}
              max_queue_size: 4096
              schedule_delay_ms: 200
            """
        let configuration = try ServerConfiguration.parse(yaml: yaml, file: "/tmp/relay.yaml", environment: [:])
        #expect(configuration.tracing.exporter == .otlp)
        #expect(configuration.tracing.endpoint == "http://collector:4318")
        #expect(configuration.tracing.samplingRatio == 0.25)
        #expect(configuration.tracing.parentBased == false)
        #expect(configuration.tracing.maximumQueueSize == 4096)
        #expect(configuration.tracing.scheduleDelayMilliseconds == 200)
        #expect(configuration.maskedDescription.contains("exporter: otlp"))
        // A base URL, like OTEL_EXPORTER_OTLP_ENDPOINT: the traces path is appended.
        let export = try OTLPExportSettings.resolve(configuration.tracing, instance: "relay-1", version: "1.2.3", environment: [:])
        #expect(export.endpoint.description == "http://collector:4318/v1/traces")
        #expect(OTLPEndpoint.tracesURL(base: "https://c.example/otlp/") == "https://c.example/otlp/v1/traces")
        #expect(export.resource.map { "\($0.0)=\($0.1)" } == ["service.name=apns-relay", "service.version=1.2.3", "service.instance.id=relay-1"])
        #expect(export.maximumQueueSize == 4096)
        #expect(export.scheduleDelayMilliseconds == 200)
        #expect(export.sampler == OTLPSampler(root: .traceIDRatio(0.25), parentBased: false))

        for (bad, field) in [
            ("tracing:\n  exporter: jaeger\n", "tracing.exporter"),
            ("tracing:\n  endpoint: collector:4317\n", "tracing.endpoint"),
            ("tracing:\n  sampling: {ratio: 1.5}\n", "tracing.sampling.ratio"),
            ("tracing:\n  max_queue_size: 10\n  max_export_batch_size: 20\n", "tracing.max_export_batch_size"),
            ("tracing:\n  sample_rate: 1\n", "tracing.sample_rate"),
        ] {
            #expect {
                try ServerConfiguration.parse(yaml: Self.apps + bad, file: "/tmp/relay.yaml", environment: [:])
            } throws: { error in
                (error as? ConfigurationError)?.field == field
            }
        }
    }

    @Test("the OTEL_* variables win over tracing: endpoint, headers, timeout, batching, resource, sampler")
    func environmentOverFile() throws {
        let file = try ServerConfiguration.parse(
            yaml: Self.apps + "tracing:\n  exporter: otlp\n  endpoint: http://file:4318\n", file: "/tmp/relay.yaml", environment: [:]).tracing
        func resolve(_ environment: [String: String]) throws -> OTLPExportSettings {
            try OTLPExportSettings.resolve(file, instance: "i-1", version: "9.9", environment: environment)
        }
        #expect(try resolve([:]).endpoint.description == "http://file:4318/v1/traces")
        #expect(try resolve(["OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:1234/base"]).endpoint.description == "http://env:1234/base/v1/traces")
        // The traces variable is the URL as it is, and wins over the base one.
        let traces = try resolve(["OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:1234", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://t.example/x/traces"])
        #expect(traces.endpoint == OTLPEndpoint(url: "https://t.example:443/x/traces"))
        #expect(traces.endpoint.path == "/x/traces")

        let headers = try resolve([
            "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20abc, x-tenant = a",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-tenant=b",
        ]).headers
        #expect(headers.map { "\($0.0): \($0.1)" } == ["authorization: Bearer abc", "x-tenant: b"])

        let batching = try resolve([
            "OTEL_BSP_SCHEDULE_DELAY": "50", "OTEL_BSP_MAX_QUEUE_SIZE": "100", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "10",
            "OTEL_EXPORTER_OTLP_TIMEOUT": "700", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        ])
        #expect(batching.scheduleDelayMilliseconds == 50 && batching.maximumQueueSize == 100 && batching.maximumExportBatchSize == 10)
        #expect(batching.exportTimeoutMilliseconds == 700 && batching.warnings.isEmpty)
        #expect(try resolve(["OTEL_EXPORTER_OTLP_TIMEOUT": "700", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "300"]).exportTimeoutMilliseconds == 300)
        let bad = try resolve(["OTEL_BSP_SCHEDULE_DELAY": "soon"])
        #expect(bad.scheduleDelayMilliseconds == 1000 && bad.warnings.first?.contains("OTEL_BSP_SCHEDULE_DELAY") == true)

        let resource = try resolve(["OTEL_RESOURCE_ATTRIBUTES": "k8s.pod.name=relay-0,service.name=from-attributes", "OTEL_SERVICE_NAME": "svc"])
        #expect(resource.resource.map { "\($0.0)=\($0.1)" } == ["service.name=svc", "service.version=9.9", "service.instance.id=i-1", "k8s.pod.name=relay-0"])

        #expect(try resolve(["OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.5"]).sampler
            == OTLPSampler(root: .traceIDRatio(0.5), parentBased: true))
        #expect(try resolve(["OTEL_TRACES_SAMPLER": "always_off"]).sampler == OTLPSampler(root: .alwaysOff, parentBased: false))
        let unknown = try resolve(["OTEL_TRACES_SAMPLER": "xray"])
        #expect(unknown.sampler == OTLPSampler(root: .traceIDRatio(1), parentBased: true) && unknown.warnings.count == 1)
    }

    @Test("a bad endpoint, protocol or header list is refused naming the variable; a header's value never appears in the error")
    func environmentRefusals() throws {
        let file = ServerConfiguration.TracingSettings()
        for (environment, field) in [
            (["OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"], "OTEL_EXPORTER_OTLP_ENDPOINT"),
            (["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "grpc://c:4317"], "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            (["OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"], "OTEL_EXPORTER_OTLP_PROTOCOL"),
            (["OTEL_EXPORTER_OTLP_HEADERS": "api-key"], "OTEL_EXPORTER_OTLP_HEADERS"),
            (["OTEL_EXPORTER_OTLP_HEADERS": "api-key=s3cret%0d%0aInjected: yes"], "OTEL_EXPORTER_OTLP_HEADERS"),
            (["OTEL_EXPORTER_OTLP_TRACES_HEADERS": "bad key=s3cret"], "OTEL_EXPORTER_OTLP_TRACES_HEADERS"),
        ] {
            #expect {
                try OTLPExportSettings.resolve(file, instance: "i", version: "v", environment: environment)
            } throws: { error in
                guard let error = error as? ConfigurationError else { return false }
                return error.field == field && !error.description.contains("s3cret")
            }
        }
    }

    @Test("the sampler: parent-based follows the caller's flag; a ratio decides by trace id, the same for every span of a trace")
    func sampler() {
        let half = OTLPSampler(root: .traceIDRatio(0.5), parentBased: true)
        #expect(half.isSampled(traceID: "4bf92f3577b34da6a3ce929d0e0e4736", parentSampled: true))
        #expect(!half.isSampled(traceID: "4bf92f3577b34da6a3ce929d0e0e4736", parentSampled: false))
        // Low 8 bytes below half of 2^64: in; above: out.
        #expect(half.isSampled(traceID: "ffffffffffffffff0000000000000001", parentSampled: nil))
        #expect(!half.isSampled(traceID: "0000000000000000ffffffffffffffff", parentSampled: nil))
        let ratioOnly = OTLPSampler(root: .traceIDRatio(0.5), parentBased: false)
        #expect(!ratioOnly.isSampled(traceID: "0000000000000000ffffffffffffffff", parentSampled: true))
        #expect(OTLPSampler(root: .alwaysOff, parentBased: true).isSampled(traceID: "0000000000000000ffffffffffffffff", parentSampled: true))
    }
}
