import ArgumentParser
import RelayServer

/// `apns-relay settings-table`: the table of every setting as markdown, for
/// scripts/generate-settings-table to put in docs/operations.md. Hidden: it
/// is for the docs, not for operators.
struct SettingsTableCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "settings-table",
        abstract: "Print every configuration setting as a markdown table (docs/operations.md).",
        shouldDisplay: false)

    func run() {
        print(ServerConfiguration.settingsTable, terminator: "")
    }
}
