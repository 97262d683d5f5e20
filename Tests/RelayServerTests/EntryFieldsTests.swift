import Foundation
@testable import RelayServer
import Testing

/// Each field of an `apps` or `api_keys` entry is declared once
/// (``ServerConfiguration/appFields``, ``ServerConfiguration/apiKeyFields``):
/// the table's type, the parser and check-config's description are walks
/// over those rows, so none of them can name a field the others miss.
@Suite("Configuration: list entries' fields")
struct EntryFieldsTests {
    static let lists: [(path: String, keys: [String])] = [
        ("apps", ServerConfiguration.appFields.map(\.key)),
        ("api_keys", ServerConfiguration.apiKeyFields.map(\.key)),
    ]

    @Test("the settings table's type of each list names exactly its entry's fields, in order")
    func tableType() throws {
        for list in Self.lists {
            let setting = try #require(ServerConfiguration.settings.first { $0.path == list.path })
            #expect(setting.type == "list of {\(list.keys.joined(separator: ", "))}")
            #expect(Set(list.keys).count == list.keys.count, "\(list.path): a field declared twice")
        }
    }

    @Test("a file that sets every field of every entry shows each field in check-config's description")
    func everyFieldShown() throws {
        let lines = ConfigurationBehaviourTests.everythingDescription.split(separator: "\n").map(String.init)
        for list in Self.lists {
            let start = try #require(lines.firstIndex(of: "\(list.path):"))
            let entries = lines[(start + 1)...].prefix { $0.hasPrefix("  ") }
            let shown = Set(entries.compactMap { line -> String? in
                let body = line.drop { $0 == " " || $0 == "-" }
                return body.firstIndex(of: ":").map { String(body[..<$0]) }
            })
            for key in list.keys { #expect(shown.contains(key), "\(list.path): \(key) is read but check-config never shows it") }
        }
    }

    @Test("a key no field reads is refused, named with its entry's path")
    func unknownKeyRefused() throws {
        let directory = try ConfigurationBehaviourTests.Directory()
        let app = ConfigurationBehaviourTests.apps.replacingOccurrences(of: "bundle_id: com.example.a", with: "bundle_id: com.example.a, bundle: x")
        #expect(app != ConfigurationBehaviourTests.apps, "the fixture changed: this test no longer adds a key")
        #expect(directory.outcome(app).hasPrefix("error: apps[0].bundle"), "\(directory.outcome(app))")
        let key = ConfigurationBehaviourTests.apps.replacingOccurrences(of: "apps: [a]}", with: "apps: [a], ratePerSecond: 3}")
        #expect(key != ConfigurationBehaviourTests.apps, "the fixture changed: this test no longer adds a key")
        #expect(directory.outcome(key).hasPrefix("error: api_keys[0].ratePerSecond"), "\(directory.outcome(key))")
    }
}
