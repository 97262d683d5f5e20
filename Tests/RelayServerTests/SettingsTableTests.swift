import Foundation
import RelayServer
import Testing

/// docs/operations.md's table of every setting is the one the relay's
/// settings table makes, as the embedded SQL is the files' copy.
@Suite("Settings table in docs/operations.md")
struct SettingsTableTests {
    @Test("docs/operations.md holds exactly ServerConfiguration.settingsTable between its markers")
    func documentedTable() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("docs/operations.md"), encoding: .utf8)
        let (begin, end) = ServerConfiguration.settingsTableMarkers
        let start = try #require(text.range(of: begin + "\n"), "docs/operations.md has no settings-table marker: run scripts/generate-settings-table")
        let stop = try #require(text.range(of: end, range: start.upperBound..<text.endIndex), "docs/operations.md has no end marker")
        #expect(String(text[start.upperBound..<stop.lowerBound]) == ServerConfiguration.settingsTable, "docs/operations.md's settings table is stale: run scripts/generate-settings-table")
    }

    @Test("the table names every setting check-config shows for a file that sets them all, with its variable and secrecy")
    func everySettingListed() throws {
        let table = ServerConfiguration.settingsTable
        let rows = table.split(separator: "\n").dropFirst(2)
        let paths = rows.map { $0.split(separator: "`")[1] }
        #expect(Set(paths).count == paths.count, "a setting listed twice")
        // Every key of the fully set file in ConfigurationBehaviourTests is a row (entries' own fields aside).
        let description = ConfigurationBehaviourTests.everythingDescription
        var blocks: [String] = []
        for line in description.split(separator: "\n") where !line.hasPrefix("#") && !line.trimmingCharacters(in: .whitespaces).hasPrefix("#") {
            let depth = line.prefix { $0 == " " }.count / 2
            let body = line.drop { $0 == " " }
            guard !body.hasPrefix("-"), let colon = body.firstIndex(of: ":") else { continue }
            blocks = Array(blocks.prefix(depth))
            let key = String(body[..<colon])
            let path = (blocks + [key]).joined(separator: ".")
            if ["apps", "api_keys"].contains(blocks.first) { continue }
            if body[body.index(after: colon)...].trimmingCharacters(in: .whitespaces).hasPrefix("{") {
                // An inline block: its keys are rows.
                let inner = body[body.index(after: colon)...].trimmingCharacters(in: CharacterSet(charactersIn: " {}"))
                for pair in inner.split(separator: ",") {
                    let name = pair.split(separator: ":")[0].trimmingCharacters(in: .whitespaces)
                    #expect(paths.contains("\(path).\(name)"[...]), "\(path).\(name) is not in the settings table")
                }
            } else if body.hasSuffix(":") {
                blocks.append(key)
                if path == "apps" || path == "api_keys" { #expect(paths.contains(path[...])) }
            } else {
                #expect(paths.contains(path[...]), "\(path) is not in the settings table")
            }
        }
        #expect(table.contains("| `audit.database_url` | libpq connection string or URL | empty: rows stay in the spool | `APNS_RELAY_DATABASE_URL` | its password is masked |"))
        #expect(table.contains("| `ingress.listen` | host:port | `127.0.0.1:8080` | `APNS_RELAY_INGRESS_LISTEN` | no |"))
    }

    @Test("deploy/apns-relay.example.yaml comments every setting of the table and lists each of its variables in its header (which scripts/check-deploy reads)")
    func exampleNamesEverySetting() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let example = try String(contentsOf: root.appendingPathComponent("deploy/apns-relay.example.yaml"), encoding: .utf8)
        let header = example.split(separator: "\n").prefix { $0.hasPrefix("#") }.joined(separator: "\n")
        let table = ServerConfiguration.settingsTable
        for row in table.split(separator: "\n").dropFirst(2) {
            let cells = row.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            let path = cells[1].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            let key = path.split(separator: ".").last.map(String.init) ?? path
            #expect(example.contains("\(key):"), "\(path) is not in deploy/apns-relay.example.yaml")
            for variable in cells[4].split(separator: ",") {
                let name = variable.trimmingCharacters(in: CharacterSet(charactersIn: " `"))
                // Per-app variables are written once there, as APNS_RELAY_APP_<NAME>_KEY_PATH / _KEY_ID / _TEAM_ID.
                let suffix = name.hasPrefix("APNS_RELAY_APP_<NAME>_") ? "_" + name.dropFirst("APNS_RELAY_APP_<NAME>_".count) : name
                #expect(header.contains(suffix), "\(name) (\(path)) is not in deploy/apns-relay.example.yaml's list of variables")
            }
        }
    }
}
