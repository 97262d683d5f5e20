import APNs
import Relay

extension ServerConfiguration {
    /// Opens every app's key and checks its bundle id, as start-up will.
    public func checkCredentials() throws {
        for app in apps {
            _ = try RequestBuilder(bundleID: app.bundleID)
            _ = try ProviderCredentials(keyID: app.keyID, teamID: app.teamID, keyPath: app.keyPath)
        }
    }

    /// The resolved settings as YAML, each as its ``Setting`` shows it
    /// (``settings``, in order): the database password masked and API keys
    /// shown by name and hash prefix only. A block's header is printed once
    /// one of its settings prints a line.
    public var maskedDescription: String {
        var lines: [String] = []
        lines.append("# resolved from \(sourceFile ?? "(no file)") and the environment")
        var headed: [Substring] = []  // the blocks whose headers are printed, outermost first
        var inline: (block: String, items: [String])?
        func flushInline() {
            guard let (block, items) = inline else { return }
            inline = nil
            let parts = block.split(separator: ".")
            head(parts.dropLast())
            lines.append(String(repeating: "  ", count: parts.count - 1) + "\(parts.last ?? ""): {\(items.joined(separator: ", "))}")
        }
        func head(_ parts: ArraySlice<Substring>) {
            var common = 0
            while common < min(headed.count, parts.count), headed[common] == parts[parts.startIndex + common] { common += 1 }
            headed = Array(parts)
            for depth in common..<parts.count { lines.append(String(repeating: "  ", count: depth) + "\(parts[parts.startIndex + depth]):") }
        }
        for setting in Self.settings {
            if let pending = inline?.block, pending != setting.block { flushInline() }
            let shown = setting.describe(self)
            guard !shown.isEmpty else { continue }
            if Self.inlineBlocks.contains(setting.block) {
                inline = (setting.block, (inline?.items ?? []) + shown)
                continue
            }
            let parts = setting.block.split(separator: ".")
            head(parts[...])
            lines += shown.map { String(repeating: "  ", count: parts.count) + $0 }
        }
        flushInline()
        return lines.joined(separator: "\n") + "\n"
    }

    /// `postgres://user:secret@host/db` → `postgres://user:****@host/db`;
    /// `host=x password=secret` → `host=x password=****`.
    public static func maskPassword(_ conninfo: String) -> String {
        if let scheme = conninfo.range(of: "://") {
            let rest = conninfo[scheme.upperBound...]
            guard let at = rest.firstIndex(of: "@") else { return conninfo }
            let userInfo = rest[..<at]
            guard let colon = userInfo.firstIndex(of: ":") else { return conninfo }
            return String(conninfo[..<scheme.upperBound]) + userInfo[..<colon] + ":****" + rest[at...]
        }
        var words: [String] = []
        var maskNext = false
        for word in conninfo.split(separator: " ", omittingEmptySubsequences: false) {
            if maskNext {
                words.append("****")
                maskNext = false
            } else if word.lowercased().hasPrefix("password") {
                let parts = word.split(separator: "=", maxSplits: 1)
                if parts.count == 2, !parts[1].isEmpty { words.append("\(parts[0])=****") } else { words.append(String(word)); maskNext = parts.count == 1 }
            } else {
                words.append(String(word))
            }
        }
        return words.joined(separator: " ")
    }
}

extension String {
    func leftPadded(to width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
