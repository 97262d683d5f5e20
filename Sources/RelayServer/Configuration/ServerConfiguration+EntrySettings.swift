import APNs
import Foundation
import Ingress
import Relay
import RelayJSON

extension ServerConfiguration {
    /// `apps` and `api_keys`: lists of entries, each read whole by its own
    /// parser (an entry's fields depend on each other: an app's name picks its
    /// credentials' variables, a key's hash is checked against weak keys and
    /// its burst follows its rate), and shown by check-config as lists.
    static let entrySettings: [Setting] = [
        Setting(
            path: "apps", type: "list of {name, bundle_id, team_id, key_id, key_path, environments}",
            variables: ["APNS_RELAY_APP_<NAME>_TEAM_ID", "APNS_RELAY_APP_<NAME>_KEY_ID", "APNS_RELAY_APP_<NAME>_KEY_PATH"],
            secrecy: .none, documentedDefault: "none: at least one is required",
            summary: "The apps the relay signs for; `<NAME>` is the app's name upper-cased, other characters than A-Z and 0-9 as `_`.",
            read: { configuration, reader, context throws(ConfigurationError) in
                guard let apps = try reader.list("apps") else { return }
                for (index, item) in apps.enumerated() {
                    configuration.apps.append(try app(item, path: "apps[\(index)]", directory: context.directory, environment: context.environment))
                }
            },
            override: nil, value: { _ in nil },
            describe: { configuration in ["apps:"] + configuration.apps.flatMap(describe) }),
        Setting(
            path: "api_keys", type: "list of {name, sha256, apps, admin, rate_per_second, burst, provider_key, client_certificate}",
            variables: [], secrecy: .keyHashes, documentedDefault: "none: at least one is required",
            summary: "The backends' API keys, by the SHA-256 of each (apns-relay api-key new makes a key and its entry).",
            read: { configuration, reader, context throws(ConfigurationError) in
                guard let keys = try reader.list("api_keys") else { return }
                for (index, item) in keys.enumerated() {
                    configuration.apiKeys.append(try apiKey(item, path: "api_keys[\(index)]", directory: context.directory))
                }
            },
            override: nil, value: { _ in nil },
            describe: { configuration in ["api_keys:"] + configuration.apiKeys.flatMap(describe) }),
    ]

    private static func describe(_ app: AppConfiguration) -> [String] {
        [
            "  - name: \(app.name)",
            "    bundle_id: \(app.bundleID)",
            "    team_id: \(app.teamID ?? "(missing)")",
            "    key_id: \(app.keyID ?? "(missing)")",
            "    key_path: \(app.keyPath ?? "(missing)")",
            "    environments: [\(app.environments.map(\.rawValue).sorted().joined(separator: ", "))]",
        ]
    }

    /// A key by name and the first four bytes of its hash only.
    private static func describe(_ key: APIKey) -> [String] {
        var lines: [String] = []
        let hash = key.hash.prefix(4).map { String($0, radix: 16).leftPadded(to: 2) }.joined()
        lines.append("  - name: \(key.name)")
        lines.append("    sha256: \(hash)…  # masked")
        lines.append("    apps: [\(key.apps.map { $0.sorted().joined(separator: ", ") } ?? "\"*\"")]")
        lines.append("    admin: \(key.isAdmin)")
        if let rate = key.ratePerSecond { lines.append("    rate_per_second: \(rate)") }
        if let burst = key.burst { lines.append("    burst: \(burst)") }
        if let provider = key.providerKey {
            lines.append("    provider_key:")
            lines.append("      key_id: \(provider.keyID)")
            lines.append("      team_id: \(provider.teamID)")
            lines.append("      public_key_file: \(provider.publicKeyFile ?? "(inline)")")
        }
        switch key.clientCertificate {
        case .sha256(let fingerprint): lines.append("    client_certificate: {sha256: \(fingerprint)}")
        case .subject(let subject): lines.append("    client_certificate: {subject: \"\(subject)\"}")
        case nil: break
        }
        return lines
    }

    private static func app(_ value: JSONValue, path: String, directory: String, environment: [String: String]) throws(ConfigurationError) -> AppConfiguration {
        var reader = try ConfigurationReader(value, path: path)
        guard let name = try reader.string("name"), !name.isEmpty else { throw ConfigurationError(field: reader.name("name"), "is required") }
        guard name.allSatisfy({ $0.isLetter || $0.isNumber || "-_.".contains($0) }), name.count <= 64 else {
            throw ConfigurationError(field: reader.name("name"), "must be 1 to 64 letters, digits, '-', '_' or '.'")
        }
        guard let bundleID = try reader.string("bundle_id"), !bundleID.isEmpty else { throw ConfigurationError(field: reader.name("bundle_id"), "is required") }
        var environments: Set<Environment> = [.development, .production]
        if let names = try reader.strings("environments") {
            environments = []
            for (index, text) in names.enumerated() {
                guard let environment = Environment(name: text) else {
                    throw ConfigurationError(field: "\(reader.name("environments"))[\(index)]", "must be development or production")
                }
                environments.insert(environment)
            }
            guard !environments.isEmpty else { throw ConfigurationError(field: reader.name("environments"), "must name at least one environment") }
        }
        // Read the file's values first so they count as known even when the environment overrides them.
        let fileTeamID = try reader.string("team_id")
        let fileKeyID = try reader.string("key_id")
        let fileKeyPath = try reader.string("key_path").map { resolve($0, against: directory) }
        let teamID = environment[Variable.app(name, "TEAM_ID")] ?? fileTeamID
        let keyID = environment[Variable.app(name, "KEY_ID")] ?? fileKeyID
        let keyPath = environment[Variable.app(name, "KEY_PATH")] ?? fileKeyPath
        try reader.rejectUnknown()
        return AppConfiguration(name: name, bundleID: bundleID, teamID: teamID, keyID: keyID, keyPath: keyPath, environments: environments)
    }

    private static func apiKey(_ value: JSONValue, path: String, directory: String) throws(ConfigurationError) -> APIKey {
        var reader = try ConfigurationReader(value, path: path)
        guard let name = try reader.string("name"), !name.isEmpty else { throw ConfigurationError(field: reader.name("name"), "is required") }
        guard let hash = try reader.string("sha256") else {
            throw ConfigurationError(field: reader.name("sha256"), "is required: the SHA-256 of the key in hex; \(Self.generateKeyHint(name))")
        }
        if let word = WeakAPIKeys.preimage(ofSHA256Hex: hash) {
            let shown = word.isEmpty ? "the empty string (was KEY unset?)" : word.hasSuffix("\n") ? "\"\(word.dropLast())\" plus a newline" : "\"\(word)\""
            throw ConfigurationError(
                field: reader.name("sha256"),
                "is the SHA-256 of \(shown), a key anyone could guess; \(Self.generateKeyHint(name))")
        }
        let apps = try reader.strings("apps") ?? ["*"]
        let isAdmin = try reader.bool("admin") ?? false
        let rate = try reader.number("rate_per_second", in: 0.001...1_000_000)
        let burst = try reader.number("burst", in: 1...10_000_000)
        let providerKey = try reader.child("provider_key").map { reader throws(ConfigurationError) in try Self.providerKey(reader, directory: directory) }
        let clientCertificate = try reader.child("client_certificate").map { reader throws(ConfigurationError) in try Self.clientCertificate(reader) }
        try reader.rejectUnknown()
        guard var key = APIKey(name: name, sha256Hex: hash, apps: apps.contains("*") ? nil : Set(apps), isAdmin: isAdmin, ratePerSecond: rate, burst: burst ?? rate.map { max(1, $0) }) else {
            throw ConfigurationError(
                field: reader.name("sha256"), "must be 64 hex digits (a SHA-256), not the key itself or a placeholder; \(Self.generateKeyHint(name))")
        }
        key.providerKey = providerKey
        key.clientCertificate = clientCertificate
        return key
    }

    /// `client_certificate:` of an API key: the TLS client certificate that
    /// stands for it on the HTTP/2 APNs ingress, by `sha256` fingerprint
    /// (hex, colons allowed: `openssl x509 -noout -fingerprint -sha256`) or
    /// by `subject` (OpenSSL's one-line form); one of the two.
    private static func clientCertificate(_ reader: ConfigurationReader) throws(ConfigurationError) -> APIKey.ClientCertificateMatch {
        var reader = reader
        let sha256 = try reader.string("sha256")
        let subject = try reader.string("subject")
        try reader.rejectUnknown()
        switch (sha256, subject) {
        case (let fingerprint?, nil):
            let hex = fingerprint.filter { $0 != ":" }.lowercased()
            guard hex.count == 64, hex.allSatisfy(\.isHexDigit) else {
                throw ConfigurationError(field: reader.name("sha256"), "must be the certificate's SHA-256 fingerprint, 64 hex digits (colons allowed)")
            }
            return .sha256(hex)
        case (nil, let name?):
            guard name.hasPrefix("/"), name.count > 1 else {
                throw ConfigurationError(field: reader.name("subject"), "must be the subject in OpenSSL's one-line form, e.g. /O=Example/CN=backend")
            }
            return .subject(name)
        default:
            throw ConfigurationError(field: reader.name("sha256"), "give sha256 or subject, one of the two")
        }
    }

    /// `provider_key:` of an API key: the backend's own APNs key (id, team,
    /// public key file) it signs provider tokens with for the HTTP/2 APNs ingress.
    private static func providerKey(_ reader: ConfigurationReader, directory: String) throws(ConfigurationError) -> APIKey.ProviderKey {
        var reader = reader
        guard let keyID = try reader.string("key_id"), keyID.count == 10, keyID.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            throw ConfigurationError(field: reader.name("key_id"), "is required: the provider key's 10-character id (the token's kid)")
        }
        guard let teamID = try reader.string("team_id"), teamID.count == 10, teamID.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            throw ConfigurationError(field: reader.name("team_id"), "is required: the 10-character team id (the token's iss)")
        }
        guard let file = try reader.string("public_key_file") else {
            throw ConfigurationError(field: reader.name("public_key_file"), "is required: the key's P-256 public key, PEM (openssl ec -in AuthKey.p8 -pubout)")
        }
        try reader.rejectUnknown()
        let path = resolve(file, against: directory)
        guard let pem = try? String(contentsOfFile: path, encoding: .utf8), pem.contains("-----BEGIN PUBLIC KEY-----") else {
            throw ConfigurationError(field: reader.name("public_key_file"), "cannot read a PEM public key from \(path)")
        }
        var key = APIKey.ProviderKey(keyID: keyID, teamID: teamID, publicKeyPEM: pem)
        key.publicKeyFile = path
        return key
    }

    /// How to make a key: the command prints the key once and its `api_keys` entry.
    static func generateKeyHint(_ name: String) -> String {
        "generate a key and its entry with: apns-relay api-key new --name \(name)"
    }
}
