import APNs
import Foundation
import Relay
import RelayJSON

extension ServerConfiguration {
    /// Environment variables the relay reads besides the settings' own
    /// (``ServerConfiguration/settings`` names those).
    public enum Variable {
        /// The configuration file, when `--config` is not given.
        public static let configFile = "APNS_RELAY_CONFIG"
        /// `audit.spool_directory`'s variable, for commands that find the spool without a file.
        public static var spoolDirectory: String { ServerConfiguration.setting("audit.spool_directory")?.variables.first ?? "APNS_RELAY_SPOOL_DIRECTORY" }

        /// `APNS_RELAY_APP_<NAME>_<SETTING>` for per-app credentials.
        public static func app(_ name: String, _ setting: String) -> String {
            let upper = name.uppercased().unicodeScalars.map { ("A"..."Z").contains($0) || ("0"..."9").contains($0) ? Character($0) : "_" }
            return "APNS_RELAY_APP_\(String(upper))_\(setting)"
        }
    }

    /// The setting at `path` (`audit.spool_directory`), if there is one.
    static func setting(_ path: String) -> Setting? { settings.first { $0.path == path } }

    /// Reads `file` (YAML) and applies `environment` on top.
    public static func load(file: String, environment: [String: String]) throws(ConfigurationError) -> ServerConfiguration {
        let text: String
        do {
            text = try String(contentsOfFile: file, encoding: .utf8)
        } catch {
            throw ConfigurationError(field: file, "cannot be read: \(error.localizedDescription)")
        }
        return try parse(yaml: text, file: file, environment: environment)
    }

    /// Parses YAML text; relative key paths are read from `file`'s directory.
    ///
    /// Walks ``settings`` in order, each read from the reader of its block
    /// (opened when its first setting comes, absent blocks skipped). A block
    /// is closed when the walk leaves it: its unknown keys are refused and its
    /// ``blockChecks`` run. Then the environment wins, and the whole is validated.
    public static func parse(yaml: String, file: String, environment: [String: String]) throws(ConfigurationError) -> ServerConfiguration {
        let root = try ConfigurationReader(ConfigurationReader.parse(yaml: yaml, file: file), path: "")
        let host = ProcessInfo.processInfo.hostName
        var configuration = ServerConfiguration(instance: host.isEmpty ? "apns-relay" : host)
        configuration.sourceFile = file
        let context = Setting.Context(directory: (file as NSString).deletingLastPathComponent, environment: environment)

        // The open blocks, outermost first; nil: the file does not have it.
        var open: [(block: String, reader: ConfigurationReader?)] = [("", root)]
        func close() throws(ConfigurationError) {
            let (block, reader) = open.removeLast()
            guard let reader else { return }
            try reader.rejectUnknown()
            for check in blockChecks where check.block == block {
                try check.check(configuration, reader.name)
            }
        }
        for setting in settings {
            let block = setting.block
            while let top = open.last?.block, !(top.isEmpty || block == top || block.hasPrefix(top + ".")) { try close() }
            while let top = open.last, top.block != block {
                let rest = block.dropFirst(top.block.isEmpty ? 0 : top.block.count + 1)
                let key = String(rest.prefix { $0 != "." })
                let path = top.block.isEmpty ? key : "\(top.block).\(key)"
                guard var parent = top.reader else {
                    open.append((path, nil))
                    continue
                }
                let child = try parent.child(key)
                open[open.count - 1].reader = parent
                open.append((path, child))
            }
            guard var reader = open[open.count - 1].reader else { continue }
            try setting.read(&configuration, &reader, context)
            open[open.count - 1].reader = reader
        }
        while !open.isEmpty { try close() }
        for setting in settings {
            try setting.override?(&configuration, environment)
        }
        try configuration.validate()
        return configuration
    }

    private func validate() throws(ConfigurationError) {
        guard !apps.isEmpty else { throw ConfigurationError(field: "apps", "at least one app is required") }
        var names = Set<String>()
        for (index, app) in apps.enumerated() where !names.insert(app.name).inserted {
            throw ConfigurationError(field: "apps[\(index)].name", "\(app.name) is configured twice")
        }
        guard !apiKeys.isEmpty else {
            throw ConfigurationError(field: "api_keys", "at least one key is required: the ingress refuses every request without one")
        }
        var keyNames = Set<String>()
        for (index, key) in apiKeys.enumerated() {
            guard keyNames.insert(key.name).inserted else { throw ConfigurationError(field: "api_keys[\(index)].name", "\(key.name) is configured twice") }
            for app in key.apps ?? [] where !names.contains(app) {
                throw ConfigurationError(field: "api_keys[\(index)].apps", "names \(app), which is not in apps")
            }
        }
        guard Self.logLevels.contains(logLevel) else {
            throw ConfigurationError(field: "logging.level", "must be one of \(Self.logLevels.joined(separator: ", "))")
        }
        if ingress.listen == metrics.listen, ingress.listen.port != 0 {
            throw ConfigurationError(field: "metrics.listen", "must differ from ingress.listen (\(ingress.listen))")
        }
    }

    static func resolve(_ path: String, against directory: String) -> String {
        path.hasPrefix("/") || directory.isEmpty ? path : (directory as NSString).appendingPathComponent(path)
    }
}

extension ServerConfiguration.Address {
    /// `host:port`, `[v6]:port`.
    init(parsing text: String, field: String) throws(ConfigurationError) {
        var host: Substring
        var port: Substring
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            host = text[text.index(after: text.startIndex)..<close]
            port = text[text.index(after: close)...].drop(while: { $0 == ":" })
        } else if let colon = text.lastIndex(of: ":") {
            host = text[..<colon]
            port = text[text.index(after: colon)...]
        } else {
            throw ConfigurationError(field: field, "must be host:port (e.g. 127.0.0.1:8080), got \(text)")
        }
        guard let number = UInt16(port), !host.isEmpty else {
            throw ConfigurationError(field: field, "must be host:port with a port from 0 to 65535, got \(text)")
        }
        if host == "*" { host = "0.0.0.0" }
        self.init(host: String(host), port: number)
    }
}
