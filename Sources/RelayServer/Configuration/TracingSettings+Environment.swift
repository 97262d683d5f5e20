import Foundation

extension ServerConfiguration.TracingSettings {
    /// The OpenTelemetry specification's SDK variables that choose where spans go.
    public enum Variable {
        /// `otlp`, `console` (the relay's log exporter; `logging`, its
        /// deprecated name, too) or `none`.
        public static let tracesExporter = "OTEL_TRACES_EXPORTER"
        /// `true` (any case): no span is exported, whatever else says so.
        public static let sdkDisabled = "OTEL_SDK_DISABLED"
    }

    /// What decided ``exporter``: the file (or its default), or one of the ``Variable``s.
    public enum ExporterSource: String, Sendable {
        case file = "tracing.exporter"
        case tracesExporter = "OTEL_TRACES_EXPORTER"
        case sdkDisabled = "OTEL_SDK_DISABLED"
    }

    /// Applies the specification's `OTEL_SDK_DISABLED` and `OTEL_TRACES_EXPORTER`
    /// over `tracing.exporter`. The variables win over the file, like the
    /// relay's own `APNS_RELAY_*` variables and like every other `OTEL_*`
    /// variable the OTLP exporter reads (`OTLPExportSettings`); `OTEL_SDK_DISABLED=true` wins over both.
    ///
    /// As the specification asks (sdk-environment-variables, "Parsing empty
    /// value", "Boolean", "Enum", "Exporter selection"):
    /// - an empty variable is the same as an unset one;
    /// - `OTEL_SDK_DISABLED` is true only for `true` in any case; any value
    ///   other than `true`, `false` or empty is a warning and counts as false;
    /// - `OTEL_TRACES_EXPORTER` is read case-insensitively and may be a
    ///   comma-separated list. The relay has one exporter at a time: the first
    ///   value it has wins and the others are a warning. A value it does not
    ///   have (`zipkin`, a typo) is a warning and ignored, so the file decides.
    ///
    /// `zipkin` or `jaeger` are warnings like any other value the relay does
    /// not have (they were refused while swift-otel, which read the variable
    /// itself and would not start with them, did the export).
    ///
    /// - Returns: the warnings to log at start-up (and print in check-config).
    mutating func applyOpenTelemetryEnvironment(_ environment: [String: String]) -> [String] {
        var warnings: [String] = []
        let disabled = Self.trimmed(environment[Variable.sdkDisabled])
        switch disabled?.lowercased() {
        case "true"?:
            exporter = .none
            exporterSource = .sdkDisabled
            return warnings
        case nil, "false"?:
            break
        case let other?:
            warnings.append("\(Variable.sdkDisabled)=\(other) is neither true nor false: taken as false, as the OpenTelemetry specification says")
        }
        guard let list = Self.trimmed(environment[Variable.tracesExporter]) else { return warnings }
        var chosen: Exporter?
        var ignored: [String] = []
        var unsupported: [String] = []
        for item in list.split(separator: ",") {
            let name = item.trimmingCharacters(in: .whitespaces).lowercased()
            guard !name.isEmpty else { continue }
            guard let exporter = Self.exporter(named: name) else {
                unsupported.append(name)
                continue
            }
            if chosen == nil { chosen = exporter } else if chosen != exporter { ignored.append(name) }
        }
        if !unsupported.isEmpty {
            warnings.append(
                "\(Variable.tracesExporter): \(unsupported.joined(separator: ", ")) is not an exporter apns-relay has "
                    + "(otlp, console, none): ignored")
        }
        if let chosen {
            if !ignored.isEmpty {
                warnings.append(
                    "\(Variable.tracesExporter)=\(list): apns-relay exports to one place; \(Self.name(chosen)) is used, "
                        + "\(ignored.joined(separator: ", ")) ignored")
            }
            exporter = chosen
            exporterSource = .tracesExporter
        }
        return warnings
    }

    /// The relay's exporter for a value of `OTEL_TRACES_EXPORTER` (lowercased).
    static func exporter(named name: String) -> Exporter? {
        switch name {
        case "otlp": .otlp
        // The specification's console exporter writes spans to standard
        // output for debugging: the relay's log exporter is that, as JSON lines.
        case "console", "logging": .log
        case "none": Exporter.none
        default: nil
        }
    }

    /// The specification's name of an exporter (`log` is its `console`).
    static func name(_ exporter: Exporter) -> String {
        exporter == .log ? "console" : exporter.rawValue
    }

    /// nil for an unset or empty (whitespace only) variable: the specification treats both alike.
    static func trimmed(_ value: String?) -> String? {
        guard let value else { return nil }
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        return trimmed.isEmpty ? nil : trimmed
    }
}
