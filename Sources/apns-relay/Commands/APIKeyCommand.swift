import APNs
import ArgumentParser
import RelayBasics

/// `apns-relay api-key`: makes API keys, so nobody has to invent one.
struct APIKeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "api-key",
        abstract: "Make API keys for backends (the configuration stores only their SHA-256).",
        subcommands: [New.self])

    struct New: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Generate a random API key; print it once, and the api_keys entry holding its SHA-256.",
            discussion: """
                The key (256 random bits) goes to the backend and into your secret store; it is shown only \
                here. Paste the printed entry under api_keys in the relay's configuration. Example: \
                apns-relay api-key new --name checkout-backend --app checkout-ios
                """)

        @Option(help: "The key's name: recorded as caller in the audit table.") var name: String
        @Option(name: .customLong("app"), help: "An app the key may send for (repeat for several; default: every app).") var apps: [String] = []
        @Flag(help: "An admin key: may flip the retry kill switch.") var admin = false
        @Option(help: "Sustained requests (and batch sends) per second; unlimited when not given.") var ratePerSecond: Double?
        @Option(help: "Requests at once, and the largest batch; default: the rate.") var burst: Double?

        func validate() throws {
            guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) }) else {
                throw ValidationError("--name must be letters, digits, '-', '_' or '.'")
            }
            for app in apps where app.isEmpty || !app.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) }) {
                throw ValidationError("--app \(app): app names are letters, digits, '-', '_' or '.'")
            }
            if let ratePerSecond, !(0.001...1_000_000).contains(ratePerSecond) { throw ValidationError("--rate-per-second must be 0.001 to 1000000") }
            if let burst, !(1...10_000_000).contains(burst) { throw ValidationError("--burst must be 1 to 10000000") }
            if burst != nil, ratePerSecond == nil { throw ValidationError("--burst needs --rate-per-second") }
        }

        func run() {
            let key = APIKeyGenerator.newKey()
            print("# API key \(name): give it to the backend and keep it in your secret store. It is shown only now.")
            print(key)
            print("")
            print("# Paste under api_keys in the relay's configuration (it holds only the SHA-256):")
            print(APIKeyGenerator.entry(name: name, key: key, apps: apps, admin: admin, ratePerSecond: ratePerSecond, burst: burst), terminator: "")
        }
    }
}

/// Keys and their configuration entries.
enum APIKeyGenerator {
    /// `apnsrelay_` and 64 hex digits: 256 bits from the system's CSPRNG
    /// (getrandom). The prefix lets secret scanners recognise a leaked key.
    static func newKey() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return "apnsrelay_" + Hex.encode(bytes)
    }

    /// The YAML list item for `api_keys`.
    static func entry(name: String, key: String, apps: [String], admin: Bool, ratePerSecond: Double?, burst: Double?) -> String {
        var lines = [
            "  - name: \(name)",
            "    sha256: \(Fingerprint.sha256Hex(Array(key.utf8)))",
            "    apps: [\(apps.isEmpty ? "\"*\"" : apps.joined(separator: ", "))]",
            "    admin: \(admin)",
        ]
        if let ratePerSecond { lines.append("    rate_per_second: \(number(ratePerSecond))") }
        if let burst { lines.append("    burst: \(number(burst))") }
        return lines.joined(separator: "\n") + "\n"
    }

    private static func number(_ value: Double) -> String {
        value.rounded() == value && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}
