/// One setting of the configuration file, declared once in
/// ``ServerConfiguration/settings``: where it lives in the YAML, what it
/// accepts, the environment variable that wins over it, whether it holds a
/// secret, its default and what it is for. Parsing, the environment
/// overrides, check-config's masked description and docs/operations.md's
/// settings table are all walks over that table.
struct Setting: Sendable {
    /// How a setting's value is shown by check-config.
    enum Secrecy: Sendable {
        /// Shown as it is.
        case none
        /// A connection string or URL: shown with its password as `****`.
        case password
        /// API keys: only each key's name and the first bytes of its SHA-256 are shown.
        case keyHashes

        /// The docs table's "secret" column.
        var documentation: String {
            switch self {
            case .none: "no"
            case .password: "its password is masked"
            case .keyHashes: "shown by name and hash prefix"
            }
        }
    }

    /// What parsing needs beyond the YAML: the file's directory (relative
    /// paths are read from it) and the environment (per-app credentials).
    struct Context {
        var directory: String
        var environment: [String: String]
    }

    typealias Read = @Sendable (inout ServerConfiguration, inout ConfigurationReader, Context) throws(ConfigurationError) -> Void
    typealias Override = @Sendable (inout ServerConfiguration, [String: String]) throws(ConfigurationError) -> Void

    /// The YAML path, dot-separated: `ingress.max_body_bytes`.
    let path: String
    /// The docs table's "type and range".
    let type: String
    /// The environment variables that win over the file (names as the docs show them).
    let variables: [String]
    let secrecy: Secrecy
    /// The docs table's default; nil: the value check-config shows for a file without the setting.
    let documentedDefault: String?
    /// One sentence for the docs table.
    let summary: String
    /// Reads `key` from the reader of the setting's block into the configuration.
    let read: Read
    /// Applies the environment over the file; nil: no variable.
    let override: Override?
    /// The value check-config shows (masked), without comments; nil: unset.
    let value: @Sendable (ServerConfiguration) -> String?
    /// check-config's lines for the setting, relative to its block's indentation; empty: not shown.
    let describe: @Sendable (ServerConfiguration) -> [String]

    /// The last component of ``path``: the YAML key.
    var key: String { path.split(separator: ".").last.map(String.init) ?? path }
    /// The mapping the key lives in: `ingress`, `tracing.sampling`; empty for the top level.
    var block: String {
        guard let dot = path.lastIndex(of: ".") else { return "" }
        return String(path[..<dot])
    }
}

/// A check across several settings of one block, run once the block is read
/// whole (and only when the file has the block).
struct BlockCheck: Sendable {
    let block: String
    let check: @Sendable (ServerConfiguration, _ field: (String) -> String) throws(ConfigurationError) -> Void
}
