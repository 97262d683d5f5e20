import Foundation
import Telemetry

/// What the OTLP exporter runs with: the `tracing:` block, with the
/// OpenTelemetry specification's SDK variables over it (they win, as every
/// `OTEL_*` and `APNS_RELAY_*` variable wins over the file).
///
/// Read here (sdk-environment-variables, otlp exporter configuration):
/// - `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the traces URL as it is), else
///   `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL; `/v1/traces` is appended), else
///   `tracing.endpoint` (a base URL), else http://localhost:4318;
/// - `OTEL_EXPORTER_OTLP_HEADERS`, then `OTEL_EXPORTER_OTLP_TRACES_HEADERS`
///   (its keys win): `key=value` pairs, comma-separated, values percent-decoded;
/// - `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`, else `OTEL_EXPORTER_OTLP_TIMEOUT`,
///   else `OTEL_BSP_EXPORT_TIMEOUT` (milliseconds), else `tracing.export_timeout_ms`;
/// - `OTEL_BSP_SCHEDULE_DELAY`, `OTEL_BSP_MAX_QUEUE_SIZE`, `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`;
/// - `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`;
/// - `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG`;
/// - `OTEL_EXPORTER_OTLP_PROTOCOL` / `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`:
///   only `http/protobuf` (the relay's one protocol); another is an error naming the variable;
/// - `OTEL_EXPORTER_OTLP_CERTIFICATE` / `_TRACES_CERTIFICATE`: the CA file for an https endpoint.
///
/// A malformed value that the specification says to ignore (a number that
/// is not one, an unknown sampler) is a warning and the file decides; a
/// malformed endpoint or header list is an error naming the variable (and
/// never showing a header's value: they are credentials).
struct OTLPExportSettings {
    var endpoint: OTLPEndpoint
    var headers: [(String, String)]
    var resource: [(String, String)]
    var sampler: OTLPSampler
    var maximumQueueSize: Int
    var maximumExportBatchSize: Int
    var scheduleDelayMilliseconds: Int
    var exportTimeoutMilliseconds: Int
    /// The CA file for an https endpoint; nil: the system's trust store.
    var certificateFile: String?
    var warnings: [String] = []

    static let defaultEndpoint = "http://localhost:4318"

    static func resolve(
        _ settings: ServerConfiguration.TracingSettings, instance: String, version: String, environment: [String: String]
    ) throws(ConfigurationError) -> OTLPExportSettings {
        func value(_ name: String) -> String? { ServerConfiguration.TracingSettings.trimmed(environment[name]) }
        var warnings: [String] = []

        // Endpoint.
        let url: String
        let field: String
        if let traces = value("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            (url, field) = (traces, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        } else if let base = value("OTEL_EXPORTER_OTLP_ENDPOINT") {
            (url, field) = (OTLPEndpoint.tracesURL(base: base), "OTEL_EXPORTER_OTLP_ENDPOINT")
        } else {
            (url, field) = (OTLPEndpoint.tracesURL(base: settings.endpoint ?? defaultEndpoint), "tracing.endpoint")
        }
        guard let endpoint = OTLPEndpoint(url: url) else {
            throw ConfigurationError(field: field, "must be an http:// or https:// URL (OTLP/HTTP), got \(url)")
        }

        for name in ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] {
            if let text = value(name), text.lowercased() != "http/protobuf" {
                throw ConfigurationError(field: name, "is \(text); apns-relay exports OTLP/HTTP with protobuf only: unset it or set http/protobuf")
            }
        }
        if let compression = value("OTEL_EXPORTER_OTLP_COMPRESSION") ?? value("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"),
           compression.lowercased() != "none" {
            warnings.append("OTEL_EXPORTER_OTLP_COMPRESSION=\(compression): apns-relay sends spans uncompressed; ignored")
        }

        // Headers: the general list, then the traces list over it.
        var headers: [(String, String)] = []
        for name in ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"] {
            guard let text = value(name) else { continue }
            for (key, headerValue) in try Self.pairs(text, variable: name, isHeaders: true) {
                headers.removeAll { $0.0 == key }
                headers.append((key, headerValue))
            }
        }

        // Resource: the relay's own attributes, OTEL_RESOURCE_ATTRIBUTES over them, OTEL_SERVICE_NAME over both.
        var resource: [(String, String)] = [
            ("service.name", RelayTracing.defaultServiceName), ("service.version", version), ("service.instance.id", instance),
        ]
        if let text = value("OTEL_RESOURCE_ATTRIBUTES") {
            do {
                for (key, attribute) in try Self.pairs(text, variable: "OTEL_RESOURCE_ATTRIBUTES", isHeaders: false) {
                    if let index = resource.firstIndex(where: { $0.0 == key }) { resource[index].1 = attribute } else { resource.append((key, attribute)) }
                }
            } catch {
                // The specification: an invalid list is discarded whole, with an error logged.
                warnings.append("\(error): ignored")
            }
        }
        if let name = value("OTEL_SERVICE_NAME") { resource[0].1 = name }

        // Sampler.
        var sampler = OTLPSampler(root: .traceIDRatio(settings.samplingRatio), parentBased: settings.parentBased)
        if let name = value("OTEL_TRACES_SAMPLER")?.lowercased() {
            var ratio = 1.0
            if let argument = value("OTEL_TRACES_SAMPLER_ARG") {
                if let parsed = Double(argument), (0...1).contains(parsed) {
                    ratio = parsed
                } else if name.hasSuffix("traceidratio") {
                    warnings.append("OTEL_TRACES_SAMPLER_ARG=\(argument) is not a ratio between 0 and 1: 1.0 is used")
                }
            }
            switch name {
            case "always_on": sampler = OTLPSampler(root: .alwaysOn, parentBased: false)
            case "always_off": sampler = OTLPSampler(root: .alwaysOff, parentBased: false)
            case "traceidratio": sampler = OTLPSampler(root: .traceIDRatio(ratio), parentBased: false)
            case "parentbased_always_on": sampler = OTLPSampler(root: .alwaysOn, parentBased: true)
            case "parentbased_always_off": sampler = OTLPSampler(root: .alwaysOff, parentBased: true)
            case "parentbased_traceidratio": sampler = OTLPSampler(root: .traceIDRatio(ratio), parentBased: true)
            default: warnings.append("OTEL_TRACES_SAMPLER=\(name) is not a sampler apns-relay has: tracing.sampling decides")
            }
        }

        // Batching.
        func milliseconds(_ name: String) -> Int? {
            guard let text = value(name) else { return nil }
            guard let number = Int(text), number >= 0 else {
                warnings.append("\(name)=\(text) is not a number of milliseconds: ignored")
                return nil
            }
            return number
        }
        func count(_ name: String) -> Int? {
            guard let text = value(name) else { return nil }
            guard let number = Int(text), number > 0 else {
                warnings.append("\(name)=\(text) is not a positive number: ignored")
                return nil
            }
            return number
        }
        let timeout =
            milliseconds("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") ?? milliseconds("OTEL_EXPORTER_OTLP_TIMEOUT")
            ?? milliseconds("OTEL_BSP_EXPORT_TIMEOUT") ?? settings.exportTimeoutMilliseconds
        let delay = milliseconds("OTEL_BSP_SCHEDULE_DELAY") ?? settings.scheduleDelayMilliseconds
        let queue = count("OTEL_BSP_MAX_QUEUE_SIZE") ?? settings.maximumQueueSize
        var batch = count("OTEL_BSP_MAX_EXPORT_BATCH_SIZE") ?? settings.maximumExportBatchSize
        if batch > queue {
            warnings.append("the export batch size (\(batch)) exceeds the queue size (\(queue)): \(queue) is used")
            batch = queue
        }
        let certificate = value("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE") ?? value("OTEL_EXPORTER_OTLP_CERTIFICATE")

        return OTLPExportSettings(
            endpoint: endpoint, headers: headers, resource: resource, sampler: sampler, maximumQueueSize: queue,
            maximumExportBatchSize: batch, scheduleDelayMilliseconds: max(1, delay),
            // 0 means "no limit" to some SDKs; a batch must end, so it is the file's value then.
            exportTimeoutMilliseconds: timeout == 0 ? settings.exportTimeoutMilliseconds : timeout,
            certificateFile: certificate, warnings: warnings)
    }

    /// `key=value,key=value` as the specification's W3C-baggage-like lists:
    /// blanks around items trimmed, values percent-decoded. For headers, keys
    /// are lowercased and must be tokens; values must not hold CR or LF. An
    /// error names the variable and the key, never a value.
    static func pairs(_ text: String, variable: String, isHeaders: Bool) throws(ConfigurationError) -> [(String, String)] {
        var result: [(String, String)] = []
        for (index, item) in text.split(separator: ",").enumerated() {
            let trimmed = item.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty else { continue }
            guard let equals = trimmed.firstIndex(of: "=") else {
                throw ConfigurationError(field: variable, "item \(index + 1) is not key=value")
            }
            var key = trimmed[..<equals].trimmingCharacters(in: .whitespaces)
            let raw = trimmed[trimmed.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            guard !key.isEmpty else { throw ConfigurationError(field: variable, "item \(index + 1) has no key") }
            guard let decoded = raw.removingPercentEncoding else {
                throw ConfigurationError(field: variable, "the value of \(key) is not valid percent-encoding")
            }
            if isHeaders {
                key = key.lowercased()
                let token = key.unicodeScalars.allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "!#$%&'*+-.^_`|~".unicodeScalars.contains($0)) }
                guard token else { throw ConfigurationError(field: variable, "\(key) is not a valid header name") }
                // Unicode scalars: "\r\n" is one Character, equal to neither "\r" nor "\n".
                guard !decoded.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else {
                    throw ConfigurationError(field: variable, "the value of \(key) holds a line break")
                }
            }
            result.append((key, decoded))
        }
        return result
    }
}
