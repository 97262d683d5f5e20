import APNs
import Audit
import Relay

extension ServerConfiguration {
    /// `apns` and `retry`: how the relay talks to APNs.
    static let apnsSettings: [Setting] = [
        .integer("apns.connections_per_origin", \.apns.connectionsPerOrigin, in: 1...64, "HTTP/2 connections per APNs host."),
        .number("apns.request_timeout_seconds", \.apns.requestTimeoutSeconds, in: 0.1...300, "One attempt at most."),
        .number("apns.send_deadline_seconds", \.apns.sendDeadlineSeconds, in: 0.1...3600, "Every attempt and backoff of one send at most."),
        .choice(
            "apns.timestamp_policy", \.apns.timestampPolicy, [.reject, .warn, .allow],
            "A Live Activity update or end whose timestamp is not newer than the last one to its token: refused, logged, or sent.",
            refusal: { _ in "must be reject, warn or allow" }),
        .integer(
            "apns.timestamp_max_lead_seconds", \.apns.timestampMaximumLeadSeconds, in: 0...86_400,
            "How far past the relay's clock a Live Activity timestamp may lie."),
    ] + Environment.allCases.map { environment in
        .scalar(
            "apns.origins.\(environment.rawValue)", \.apns.origins[environment], type: "host:port", default: "Apple's host",
            "Replaces Apple's \(environment.rawValue) host: tests and the demo's mock APNs only.",
            parse: { reader, key, _ throws(ConfigurationError) in
                guard let text = try reader.string(key) else { return nil }
                let address = try Address(parsing: text, field: reader.name(key))
                return .some(Origin(host: address.host, port: Int(address.port)))
            },
            show: { $0.map { "\($0.host):\($0.port)" } })
    } + [
        .file("apns.ca_file", \.apns.caFile, unset: nil, "A CA bundle to trust for apns.origins: tests and the mock only."),

        .integer("retry.max_retries", \.retry.maxRetries, in: 0...10, "Retries of one send at most (priority-10 sends get at most 2)."),
        .milliseconds("retry.base_delay_ms", \.retry.baseDelay, in: 1...60_000, "The first backoff step."),
        .milliseconds("retry.max_delay_ms", \.retry.maxDelay, in: 1...600_000, "The longest exponential backoff step."),
    ]

    /// `audit`: where every send's row goes.
    static let auditSettings: [Setting] = [
        .scalar(
            "audit.database_url", \.audit.databaseURL, type: "libpq connection string or URL", secrecy: .password,
            variable: "APNS_RELAY_DATABASE_URL", default: "empty: rows stay in the spool",
            "The Postgres the audit rows go to; better in the environment, so the file holds no password. An empty variable empties it. "
                + "A list of servers (libpq's host=a,b or postgresql://u@a:5432,b:5432/db) is tried in order for one that takes writes (target_session_attrs=read-write unless the URL sets it), each name looked up within audit.postgres_timeout_ms.",
            parse: { reader, key, _ throws(ConfigurationError) in
                guard let url = try reader.string(key), !url.isEmpty else { return nil }
                return .some(url)
            },
            // Set and empty: no database, whatever the file says.
            fromVariable: { text, _ in .some(text.isEmpty ? nil : text) },
            show: { $0 }, unset: "\"\"  # none: rows stay in the spool"),
        .text(
            "audit.spool_directory", \.audit.spoolDirectory, variable: "APNS_RELAY_SPOOL_DIRECTORY", type: "directory path",
            "Where audit rows wait while Postgres is away, and the journal."),
        .flag("audit.migrate_on_start", \.audit.migrateOnStart, "Apply sql/migrations at start-up (advisory-locked)."),
        .integer("audit.retention_days", \.audit.retentionDays, in: 1...3650, unset: "(keep forever)", "Daily partitions older than this are dropped."),
        .integer("audit.batch_size", \.audit.batchSize, in: 1...100_000, "Rows per COPY at most."),
        .integer("audit.flush_interval_ms", \.audit.flushIntervalMilliseconds, in: 1...60_000, "A partial batch is written this long after the previous one."),
        .choice(
            "audit.journal_sync", \.audit.journalSync, AuditWriter.JournalSync.allCases, variable: "APNS_RELAY_AUDIT_JOURNAL_SYNC",
            "When a send's journal record counts as durable: written (interval) or fdatasync'd (always).",
            refusal: { "must be interval or always, got \($0)" }),
        .integer(
            "audit.journal_sync_interval_ms", \.audit.journalSyncIntervalMilliseconds, in: 1...10_000, "interval: milliseconds between the journal's fdatasyncs.",
            comment: { $0.audit.journalSync == .always ? "unused: always syncs before the send goes on" : nil }),
        .milliseconds(
            "audit.postgres_timeout_ms", \.audit.postgresTimeout, in: 100...600_000,
            "The longest wait on Postgres for a connect or one statement; past it the connection is closed: rows go to the spool, a keyed send is answered 503."),
    ]

    /// `tracing`, `shutdown` and `logging`.
    static let processSettings: [Setting] = [
        exporterSetting,
        .scalar(
            "tracing.endpoint", \.tracing.endpoint, type: "http:// or https:// URL", secrecy: .password,
            default: "OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318",
            "The collector's OTLP/HTTP base URL (/v1/traces is appended); OTEL_EXPORTER_OTLP_ENDPOINT wins when the exporter starts.",
            parse: { reader, key, _ throws(ConfigurationError) in
                guard let endpoint = try reader.string(key), !endpoint.isEmpty else { return nil }
                guard endpoint.hasPrefix("http://") || endpoint.hasPrefix("https://") else {
                    throw ConfigurationError(field: reader.name(key), "must be an http:// or https:// URL (OTLP/HTTP), got \(endpoint)")
                }
                return .some(endpoint)
            },
            show: { $0 }, unset: "(OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318)"),
        .number("tracing.sampling.ratio", \.tracing.samplingRatio, in: 0...1, "The share of new traces recorded."),
        .flag("tracing.sampling.parent_based", \.tracing.parentBased, "A caller's sampled flag in traceparent decides for its trace."),
        .integer("tracing.max_queue_size", \.tracing.maximumQueueSize, in: 1...1_000_000, "Spans waiting for export at most; past it they are dropped."),
        .integer(
            "tracing.max_export_batch_size", \.tracing.maximumExportBatchSize, in: 1...100_000,
            "Spans per OTLP request at most; not above tracing.max_queue_size."),
        .integer("tracing.schedule_delay_ms", \.tracing.scheduleDelayMilliseconds, in: 1...600_000, "How often the queue is exported."),
        .integer("tracing.export_timeout_ms", \.tracing.exportTimeoutMilliseconds, in: 1...600_000, "An export not answered within this is given up."),

        .number("shutdown.drain_timeout_seconds", \.drainTimeoutSeconds, in: 0...3600, "How long in-flight sends may take to finish on SIGTERM."),

        // Checked once the environment has had its say (validate()), so a
        // good APNS_RELAY_LOG_LEVEL mends a bad file.
        .text(
            "logging.level", \.logLevel, variable: "APNS_RELAY_LOG_LEVEL", type: "one of " + logLevels.joined(separator: ", "),
            "The least severe log line written."),
    ]

    static let logLevels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]

    /// `tracing.exporter`: OpenTelemetry's `OTEL_SDK_DISABLED` and
    /// `OTEL_TRACES_EXPORTER` win over it by the specification's rules
    /// (`TracingSettings+Environment.swift`), and check-config says which
    /// decided and what they said that was ignored.
    static let exporterSetting: Setting = {
        let file = Setting.choice(
            "tracing.exporter", \.tracing.exporter, TracingSettings.Exporter.allCases,
            "Where finished spans go: an OTLP collector, the log, or nowhere.",
            refusal: { "must be otlp, log or none, got \($0)" },
            comment: { $0.tracing.exporterSource == .file ? nil : "from \($0.tracing.exporterSource.rawValue)" })
        return Setting(
            path: file.path, type: file.type, variables: [TracingSettings.Variable.tracesExporter, TracingSettings.Variable.sdkDisabled],
            secrecy: .none, documentedDefault: nil, summary: file.summary, read: file.read,
            override: { configuration, environment in
                configuration.tracing.environmentWarnings = configuration.tracing.applyOpenTelemetryEnvironment(environment)
            },
            value: file.value,
            describe: { configuration in file.describe(configuration) + configuration.tracing.environmentWarnings.map { "# warning: \($0)" } })
    }()

    /// The OTLP exporter sends its queue in batches no larger than the queue.
    static let tracingCheck = BlockCheck(block: "tracing") { configuration, field throws(ConfigurationError) in
        guard configuration.tracing.maximumExportBatchSize <= configuration.tracing.maximumQueueSize else {
            throw ConfigurationError(field: field("max_export_batch_size"), "must not exceed tracing.max_queue_size (\(configuration.tracing.maximumQueueSize))")
        }
    }
}
