import APNs
import ArgumentParser
import Audit
import Foundation
import RelayJSON
import RelayServer
import RelayBasics

/// `apns-relay audit`: the on-call questions, answered from the audit table.
struct AuditCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Answer \"what happened to this push?\" from the audit table.",
        subcommands: [Show.self, Token.self, Traps.self, DeadTokens.self, Quarantine.self])

    enum Format: String, ExpressibleByArgument, CaseIterable { case table, json }

    struct Output: ParsableArguments {
        @Option(help: "table or json.") var format: Format = .table
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Every audit row for one apns-id.")
        @Argument(help: "The apns-id the backend got back.") var apnsID: String
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: Output
        func run() throws { try AuditCommand.run("by_apns_id", ["apns_id": apnsID.lowercased()], database, output) }
    }

    struct Token: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Recent sends to a token (fingerprinted here; the token is never stored or printed).")
        @Argument(help: "The device or activity token (hex).") var token: String
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: Output
        func run() throws { try AuditCommand.run("by_token_fingerprint", ["fingerprint": Fingerprint.of(token)], database, output) }
    }

    struct Traps: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Trap hits per app and trap id.")
        @Option(help: "How far back: 30m, 1h, 24h, 7d.") var since = "24h"
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: Output
        func run() throws { try AuditCommand.run("trap_hits", ["since": try AuditCommand.interval(since)], database, output) }
    }

    struct DeadTokens: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "dead-tokens", abstract: "Tokens APNs called dead for an app since a time.")
        @Option(help: "The app name.") var app: String
        @Option(help: "A timestamp (2026-11-22T00:00Z) or a duration back from now (24h).") var since = "24h"
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: Output
        func run() throws {
            // A duration (24h) counts back from now; anything else is taken as a timestamp.
            let value = (try? AuditCommand.interval(since)) == nil ? since : try AuditCommand.pastTimestamp(since)
            try AuditCommand.run("dead_tokens_since", ["app": app, "since": value], database, output)
        }
    }

    struct Quarantine: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Rows Postgres refused for their data, kept beside the spool (quarantine/quarantine.jsonl).",
            discussion: """
                Lists what the writer quarantined: when, the SQLSTATE and error, the kind (audit or dead_token), \
                the apns-id and app. Dead-token rows hold a token, which is never printed. The file keeps each \
                row's COPY line (base64) for an operator to fix and re-insert; see docs/runbooks.md.
                """)
        @Option(name: .customLong("spool-directory"), help: "The relay's audit spool directory (default: audit.spool_directory of --config, else $APNS_RELAY_SPOOL_DIRECTORY, else /var/lib/apns-relay/spool).")
        var spoolDirectory: String?
        @OptionGroup var config: ConfigurationOptions
        @OptionGroup var output: Output

        func run() throws {
            let environment = ProcessInfo.processInfo.environment
            let directory: String
            if let spoolDirectory {
                directory = spoolDirectory
            } else if config.file != nil || environment[ServerConfiguration.Variable.configFile] != nil {
                directory = try config.load().audit.spoolDirectory
            } else {
                directory = environment[ServerConfiguration.Variable.spoolDirectory] ?? ServerConfiguration(instance: "cli").audit.spoolDirectory
            }
            let entries = try AuditQuarantine(directory: directory + "/quarantine").entries()
            let columns = ["quarantined_at", "kind", "sqlstate", "apns_id", "app", "error"]
            let rows = entries.map { [$0.quarantinedAt, $0.kind, $0.sqlState ?? "", $0.apnsID ?? "", $0.app ?? "", $0.error] }
            switch output.format {
            case .json:
                print(JSONValue.array(rows.map { row in
                    JSONValue.object(JSONObject(zip(columns, row).map { ($0, JSONValue.string($1)) }))
                }).encodedString())
            case .table:
                print("-- Rows Postgres refused for their data (\(directory)/quarantine/quarantine.jsonl)")
                print(Table(columns: columns, rows: rows).rendered)
                print("(\(rows.count) row\(rows.count == 1 ? "" : "s"))")
            }
        }
    }

    static func run(_ name: String, _ values: [String: String], _ database: DatabaseOptions, _ output: Output) throws {
        let query = OnCallQuery.named(name)!
        let rows = try AuditQueryRunner(conninfo: database.conninfo, logger: makeLogger(level: "info")).run(query, values)
        switch output.format {
        case .json:
            let objects = rows.rows.map { row in
                JSONValue.object(JSONObject(zip(rows.columns, row).map { ($0, $1.map(JSONValue.string) ?? .null) }))
            }
            print(JSONValue.array(objects).encodedString())
        case .table:
            print("-- \(query.question)")
            print(Table(columns: rows.columns, rows: rows.rows.map { $0.map { $0 ?? "∅" } }).rendered)
            print("(\(rows.rows.count) row\(rows.rows.count == 1 ? "" : "s"))")
        }
    }

    /// `30m`, `1h`, `7d` as a Postgres interval.
    static func interval(_ text: String) throws -> String {
        guard let unit = text.last, let amount = Int(text.dropLast()), amount > 0 else {
            throw ValidationError("durations look like 30m, 1h or 7d (got \(text))")
        }
        switch unit {
        case "s": return "\(amount) seconds"
        case "m": return "\(amount) minutes"
        case "h": return "\(amount) hours"
        case "d": return "\(amount) days"
        default: throw ValidationError("durations look like 30m, 1h or 7d (got \(text))")
        }
    }

    /// A duration back from now as an ISO timestamp, for queries that take a time.
    static func pastTimestamp(_ duration: String) throws -> String {
        let seconds: Int64
        let amount = Int64(duration.dropLast()) ?? 0
        switch duration.last {
        case "s": seconds = amount
        case "m": seconds = amount * 60
        case "h": seconds = amount * 3600
        case "d": seconds = amount * 86_400
        default: throw ValidationError("durations look like 30m, 1h or 7d (got \(duration))")
        }
        return RFC3339.format(nanoseconds: UInt64(UnixTime.nowSeconds() - seconds) * 1_000_000_000)
    }
}

/// Plain column-aligned text.
struct Table {
    var columns: [String]
    var rows: [[String]]

    /// Columns printed whole however wide: ids and tokens are copied into the
    /// next command (`audit show`, a prune script), so a clipped one is useless.
    static let unclipped: Set<String> = ["token", "token_fingerprint", "apns_id", "trace_id", "channel_id", "snapshot_id"]

    var rendered: String {
        var widths = columns.map(\.count)
        for row in rows {
            for (index, cell) in row.enumerated() {
                widths[index] = max(widths[index], Self.unclipped.contains(columns[index]) ? cell.count : min(cell.count, 60))
            }
        }
        func line(_ cells: [String]) -> String {
            zip(cells, widths).map { cell, width in
                let clipped = cell.count > width ? String(cell.prefix(width - 1)) + "…" : cell
                return clipped + String(repeating: " ", count: width - clipped.count)
            }.joined(separator: "  ")
        }
        return ([line(columns), line(widths.map { String(repeating: "-", count: $0) })] + rows.map(line)).joined(separator: "\n")
    }
}
