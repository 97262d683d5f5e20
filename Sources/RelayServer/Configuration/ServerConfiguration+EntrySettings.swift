import APNs
import Foundation
import Ingress
import Relay
import RelayJSON

extension ServerConfiguration {
    /// `apps` and `api_keys`: lists of entries, each entry's fields declared
    /// once (``appFields``, ``apiKeyFields``) and read in order; an entry's
    /// checks across fields run where it is built (an app's name picks its
    /// credentials' variables, a key's hash is checked against weak keys and
    /// its burst follows its rate). check-config shows them as lists.
    static let entrySettings: [Setting] = [
        Setting(
            path: "apps", type: appFields.entryType(),
            variables: ["APNS_RELAY_APP_<NAME>_TEAM_ID", "APNS_RELAY_APP_<NAME>_KEY_ID", "APNS_RELAY_APP_<NAME>_KEY_PATH"],
            secrecy: .none, documentedDefault: "none: at least one is required",
            summary: "The apps the relay signs for; `<NAME>` is the app's name upper-cased, other characters than A-Z and 0-9 as `_`.",
            read: { configuration, reader, context throws(ConfigurationError) in
                guard let apps = try reader.list("apps") else { return }
                for (index, item) in apps.enumerated() {
                    configuration.apps.append(try app(item, path: "apps[\(index)]", context))
                }
            },
            override: nil, value: { _ in nil },
            describe: { configuration in ["apps:"] + configuration.apps.flatMap(appFields.describe) }),
        Setting(
            path: "api_keys", type: apiKeyFields.entryType(),
            variables: [], secrecy: .keyHashes, documentedDefault: "none: at least one is required",
            summary: "The backends' API keys, by the SHA-256 of each (apns-relay api-key new makes a key and its entry).",
            read: { configuration, reader, context throws(ConfigurationError) in
                guard let keys = try reader.list("api_keys") else { return }
                for (index, item) in keys.enumerated() {
                    configuration.apiKeys.append(try apiKey(item, path: "api_keys[\(index)]", context))
                }
            },
            override: nil, value: { _ in nil },
            describe: { configuration in ["api_keys:"] + configuration.apiKeys.flatMap(apiKeyFields.describe) }),
    ]

    /// An `apps` entry as its fields are read.
    struct AppDraft {
        var name = ""
        var bundleID = ""
        var teamID: String?
        var keyID: String?
        var keyPath: String?
        var environments: Set<Environment> = [.development, .production]
    }

    /// The fields of an `apps` entry, in the order they are read.
    static let appFields: [EntryField<AppDraft, AppConfiguration>] = [
        EntryField("name", read: { draft, reader, _ throws(ConfigurationError) in
            guard let name = try reader.string("name"), !name.isEmpty else { throw ConfigurationError(field: reader.name("name"), "is required") }
            guard name.allSatisfy({ $0.isLetter || $0.isNumber || "-_.".contains($0) }), name.count <= 64 else {
                throw ConfigurationError(field: reader.name("name"), "must be 1 to 64 letters, digits, '-', '_' or '.'")
            }
            draft.name = name
        }, shown: \.name),
        EntryField("bundle_id", read: { draft, reader, _ throws(ConfigurationError) in
            guard let bundleID = try reader.string("bundle_id"), !bundleID.isEmpty else { throw ConfigurationError(field: reader.name("bundle_id"), "is required") }
            draft.bundleID = bundleID
        }, shown: \.bundleID),
        // The credentials: the file's value read first, so it counts as
        // known even when the app's variable (named after the app) wins.
        EntryField("team_id", read: { draft, reader, context throws(ConfigurationError) in
            let file = try reader.string("team_id")
            draft.teamID = context.environment[Variable.app(draft.name, "TEAM_ID")] ?? file
        }, shown: { $0.teamID ?? "(missing)" }),
        EntryField("key_id", read: { draft, reader, context throws(ConfigurationError) in
            let file = try reader.string("key_id")
            draft.keyID = context.environment[Variable.app(draft.name, "KEY_ID")] ?? file
        }, shown: { $0.keyID ?? "(missing)" }),
        EntryField("key_path", read: { draft, reader, context throws(ConfigurationError) in
            let file = try reader.string("key_path").map { resolve($0, against: context.directory) }
            draft.keyPath = context.environment[Variable.app(draft.name, "KEY_PATH")] ?? file
        }, shown: { $0.keyPath ?? "(missing)" }),
        EntryField("environments", read: { draft, reader, _ throws(ConfigurationError) in
            guard let names = try reader.strings("environments") else { return }
            var environments: Set<Environment> = []
            for (index, text) in names.enumerated() {
                guard let environment = Environment(name: text) else {
                    throw ConfigurationError(field: "\(reader.name("environments"))[\(index)]", "must be development or production")
                }
                environments.insert(environment)
            }
            guard !environments.isEmpty else { throw ConfigurationError(field: reader.name("environments"), "must name at least one environment") }
            draft.environments = environments
        }, shown: { "[\($0.environments.map(\.rawValue).sorted().joined(separator: ", "))]" }),
    ]

    private static func app(_ value: JSONValue, path: String, _ context: Setting.Context) throws(ConfigurationError) -> AppConfiguration {
        var reader = try ConfigurationReader(value, path: path)
        var draft = AppDraft()
        try appFields.read(into: &draft, from: &reader, context)
        return AppConfiguration(
            name: draft.name, bundleID: draft.bundleID, teamID: draft.teamID, keyID: draft.keyID, keyPath: draft.keyPath,
            environments: draft.environments)
    }

    /// An `api_keys` entry as its fields are read.
    struct APIKeyDraft {
        var name = ""
        var sha256 = ""
        var apps = ["*"]
        var isAdmin = false
        var ratePerSecond: Double?
        var burst: Double?
        var providerKey: APIKey.ProviderKey?
        var clientCertificate: APIKey.ClientCertificateMatch?
    }

    /// The fields of an `api_keys` entry, in the order they are read.
    static let apiKeyFields: [EntryField<APIKeyDraft, APIKey>] = [
        EntryField("name", read: { draft, reader, _ throws(ConfigurationError) in
            guard let name = try reader.string("name"), !name.isEmpty else { throw ConfigurationError(field: reader.name("name"), "is required") }
            draft.name = name
        }, shown: \.name),
        EntryField("sha256", read: { draft, reader, _ throws(ConfigurationError) in
            guard let hash = try reader.string("sha256") else {
                throw ConfigurationError(field: reader.name("sha256"), "is required: the SHA-256 of the key in hex; \(Self.generateKeyHint(draft.name))")
            }
            if let word = WeakAPIKeys.preimage(ofSHA256Hex: hash) {
                let shown = word.isEmpty ? "the empty string (was KEY unset?)" : word.hasSuffix("\n") ? "\"\(word.dropLast())\" plus a newline" : "\"\(word)\""
                throw ConfigurationError(
                    field: reader.name("sha256"),
                    "is the SHA-256 of \(shown), a key anyone could guess; \(Self.generateKeyHint(draft.name))")
            }
            draft.sha256 = hash
        }, shown: { key in
            // The name and the first four bytes of the hash only.
            key.hash.prefix(4).map { String($0, radix: 16).leftPadded(to: 2) }.joined() + "…  # masked"
        }),
        EntryField("apps", read: { draft, reader, _ throws(ConfigurationError) in
            if let apps = try reader.strings("apps") { draft.apps = apps }
        }, shown: { "[\($0.apps.map { $0.sorted().joined(separator: ", ") } ?? "\"*\"")]" }),
        EntryField("admin", read: { draft, reader, _ throws(ConfigurationError) in
            draft.isAdmin = try reader.bool("admin") ?? false
        }, shown: { "\($0.isAdmin)" }),
        EntryField("rate_per_second", read: { draft, reader, _ throws(ConfigurationError) in
            draft.ratePerSecond = try reader.number("rate_per_second", in: 0.001...1_000_000)
        }, describe: { key in key.ratePerSecond.map { ["rate_per_second: \($0)"] } ?? [] }),
        EntryField("burst", read: { draft, reader, _ throws(ConfigurationError) in
            draft.burst = try reader.number("burst", in: 1...10_000_000)
        }, describe: { key in key.burst.map { ["burst: \($0)"] } ?? [] }),
        EntryField("provider_key", read: { draft, reader, context throws(ConfigurationError) in
            draft.providerKey = try reader.child("provider_key").map { reader throws(ConfigurationError) in
                try Self.providerKey(reader, directory: context.directory)
            }
        }, describe: { key in
            guard let provider = key.providerKey else { return [] }
            return [
                "provider_key:", "  key_id: \(provider.keyID)", "  team_id: \(provider.teamID)",
                "  public_key_file: \(provider.publicKeyFile ?? "(inline)")",
            ]
        }),
        EntryField("client_certificate", read: { draft, reader, _ throws(ConfigurationError) in
            draft.clientCertificate = try reader.child("client_certificate").map { reader throws(ConfigurationError) in try Self.clientCertificate(reader) }
        }, describe: { key in
            switch key.clientCertificate {
            case .sha256(let fingerprint): ["client_certificate: {sha256: \(fingerprint)}"]
            case .subject(let subject): ["client_certificate: {subject: \"\(subject)\"}"]
            case nil: []
            }
        }),
    ]

    private static func apiKey(_ value: JSONValue, path: String, _ context: Setting.Context) throws(ConfigurationError) -> APIKey {
        var reader = try ConfigurationReader(value, path: path)
        var draft = APIKeyDraft()
        try apiKeyFields.read(into: &draft, from: &reader, context)
        let apps = draft.apps.contains("*") ? nil : Set(draft.apps)
        let burst = draft.burst ?? draft.ratePerSecond.map { max(1, $0) }
        guard var key = APIKey(name: draft.name, sha256Hex: draft.sha256, apps: apps, isAdmin: draft.isAdmin, ratePerSecond: draft.ratePerSecond, burst: burst)
        else {
            throw ConfigurationError(
                field: reader.name("sha256"), "must be 64 hex digits (a SHA-256), not the key itself or a placeholder; \(Self.generateKeyHint(draft.name))")
        }
        key.providerKey = draft.providerKey
        key.clientCertificate = draft.clientCertificate
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
