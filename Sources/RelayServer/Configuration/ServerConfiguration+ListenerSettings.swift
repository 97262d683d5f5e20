import APNs
import Foundation

extension ServerConfiguration {
    /// `instance`, `ingress`, `metrics` and `apns_ingress`: who the relay is and where it listens.
    static let listenerSettings: [Setting] = [
        .text(
            "instance", \.instance, variable: "APNS_RELAY_INSTANCE", default: "the host name",
            "Names this relay in the audit table (relay_instance), logs and spans."),

        .address("ingress.listen", \.ingress.listen, variable: "APNS_RELAY_INGRESS_LISTEN", "Where the backend-facing API (docs/api.md) listens."),
        .integer("ingress.max_body_bytes", \.ingress.maximumBodyBytes, in: 1024...(64 << 20), "A larger request body is answered 413."),
        .integer("ingress.max_batch_items", \.ingress.maximumBatchItems, in: 1...10_000, "Items per POST /v1/send/batch at most."),
        .integer("ingress.max_concurrent_requests", \.ingress.maximumConcurrentRequests, in: 1...100_000, "Requests handled at once; beyond it 503 Overloaded."),
        .integer(
            "ingress.max_sends_in_flight", \.ingress.maximumSendsInFlight, in: 1...10_000_000,
            "Sends admitted and unfinished across the relay (a batch counts whole); beyond it 503 Overloaded."),
        .integer("ingress.max_batch_sends_running", \.ingress.maximumBatchSendsRunning, in: 1...100_000, "Sends of all batches on the wire at once."),
        .integer(
            "ingress.batch_concurrency", \.ingress.batchConcurrency, in: 1...100_000, unset: "max_batch_sends_running / 8",
            default: "unset: max_batch_sends_running / 8", "Sends of one batch on the wire at once."),
        .number("ingress.batch_deadline_seconds", \.ingress.batchDeadlineSeconds, in: 1...3600, "A batch's unstarted sends are answered NotSent after this."),
        .number(
            "ingress.idempotency_window_seconds", \.ingress.idempotencyWindowSeconds, in: 1...(30 * 86_400),
            "How long an Idempotency-Key returns its first send's answer."),
        .integer("ingress.connection_timeout_seconds", \.ingress.connectionTimeoutSeconds, in: 1...3600, "An idle client (or one not reading its answer) is cut off after this."),
        .integer("ingress.request_timeout_seconds", \.ingress.requestTimeoutSeconds, in: 1...300, "A whole request (headers and body) must arrive within this."),
        .integer("ingress.max_connections_per_client", \.ingress.maximumConnectionsPerClient, in: 0...100_000, "Open connections per client address; 0: no cap."),
        .integer("ingress.threads", \.ingress.threads, in: 1...64, "libmicrohttpd's polling threads."),

        .address("metrics.listen", \.metrics.listen, variable: "APNS_RELAY_METRICS_LISTEN", "Where /metrics, /healthz and /readyz listen; must differ from ingress.listen."),

        .scalar(
            "apns_ingress.listen", \.apnsIngress.listen, type: "host:port, or empty", default: "empty: off",
            "Where the APNs-compatible HTTP/2 listener listens; off while empty.",
            parse: { reader, key, _ throws(ConfigurationError) in
                guard let text = try reader.string(key), !text.isEmpty else { return nil }
                return .some(try Address(parsing: text, field: reader.name(key)))
            },
            show: { $0?.description }, unset: "\"\"  # off"),
        .flag(
            "apns_ingress.tls", \.apnsIngress.tls, "TLS with ALPN h2; false: cleartext HTTP/2 with prior knowledge (loopback, a mesh).",
            comment: { $0.apnsIngress.tls ? nil : "cleartext HTTP/2 with prior knowledge" }, shownWhen: { $0.apnsIngress.listen != nil }),
        .file(
            "apns_ingress.certificate_file", \.apnsIngress.certificateFile, unset: "(missing)", "The listener's certificate chain, PEM; required with tls.",
            shownWhen: { $0.apnsIngress.listen != nil && $0.apnsIngress.tls }),
        .file(
            "apns_ingress.private_key_file", \.apnsIngress.privateKeyFile, unset: "(missing)", "The certificate's private key, PEM; required with tls.",
            shownWhen: { $0.apnsIngress.listen != nil && $0.apnsIngress.tls }),
        .scalar(
            "apns_ingress.client_ca_file", \.apnsIngress.clientCAFile, type: "file path (relative: to the file's directory), PEM certificates",
            "CAs whose TLS client certificates stand for the api_keys entries naming them (client_certificate); tls only.",
            parse: { reader, key, context throws(ConfigurationError) in
                guard let value = try reader.string(key), !value.isEmpty else { return nil }
                let path = resolve(value, against: context.directory)
                guard let pem = try? String(contentsOfFile: path, encoding: .utf8), pem.contains("-----BEGIN CERTIFICATE-----") else {
                    throw ConfigurationError(field: reader.name(key), "cannot read a PEM certificate from \(path)")
                }
                return .some(path)
            },
            show: { $0 }, shownWhen: { $0.apnsIngress.listen != nil && $0.apnsIngress.tls }),
        .scalar(
            "apns_ingress.environment", \.apnsIngress.environment, type: "development or production", default: "the app's only one",
            "The APNs environment the listener plays.",
            parse: { reader, key, _ throws(ConfigurationError) in
                guard let value = try reader.string(key) else { return nil }
                guard let environment = Environment(name: value) else {
                    throw ConfigurationError(field: reader.name(key), "must be development or production, not \(value)")
                }
                return .some(environment)
            },
            show: { $0?.rawValue }, unset: "(the app's only one)", shownWhen: { $0.apnsIngress.listen != nil }),
        .integer(
            "apns_ingress.max_concurrent_streams", \.apnsIngress.maximumConcurrentStreams, in: 1...10_000, "SETTINGS_MAX_CONCURRENT_STREAMS per connection.",
            shownWhen: { $0.apnsIngress.listen != nil }),
        .integer(
            "apns_ingress.max_header_list_bytes", \.apnsIngress.maximumHeaderListBytes, in: 1024...(1 << 20), "A larger request header block is answered 431.",
            shownWhen: { $0.apnsIngress.listen != nil }),
        .integer(
            "apns_ingress.max_body_bytes", \.apnsIngress.maximumBodyBytes, in: 5120...(1 << 20), "A larger request body is answered 413 PayloadTooLarge.",
            shownWhen: { $0.apnsIngress.listen != nil }),
        .integer(
            "apns_ingress.max_connections_per_client", \.apnsIngress.maximumConnectionsPerClient, in: 1...100_000, "Connections at once per client address.",
            shownWhen: { $0.apnsIngress.listen != nil }),
        .integer(
            "apns_ingress.max_connections", \.apnsIngress.maximumConnections, in: 1...100_000, "Connections at once in all.",
            shownWhen: { $0.apnsIngress.listen != nil }),
        .number(
            "apns_ingress.request_timeout_seconds", \.apnsIngress.requestTimeoutSeconds, in: 0.1...300, "A request not complete by then is reset.",
            shownWhen: { $0.apnsIngress.listen != nil }),
    ]

    /// The HTTP/2 APNs ingress's TLS needs a certificate and a key; client
    /// certificates need TLS.
    static let apnsIngressCheck = BlockCheck(block: "apns_ingress") { configuration, field throws(ConfigurationError) in
        let settings = configuration.apnsIngress
        if settings.listen != nil, settings.tls {
            guard settings.certificateFile != nil, settings.privateKeyFile != nil else {
                throw ConfigurationError(
                    field: field(settings.certificateFile == nil ? "certificate_file" : "private_key_file"),
                    "is required with tls: true (PEM files; or tls: false for cleartext HTTP/2 on loopback or a mesh)")
            }
        }
        if settings.clientCAFile != nil, !settings.tls {
            throw ConfigurationError(field: field("client_ca_file"), "needs tls: true (client certificates are a TLS feature)")
        }
    }
}
