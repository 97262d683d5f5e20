internal import CLibPQ
import Foundation
import Glibc
import RelayBasics

/// A conninfo string as libpq parses it, for a connect whose host names are
/// looked up by the relay (``HostLookup``) rather than by libpq.
///
/// libpq's non-blocking connect still looks a host name up with a blocking
/// `getaddrinfo` inside `PQconnectStart`/`PQconnectPoll`: against a resolver
/// that does not answer, a bounded connect waited as long as resolv.conf's
/// `timeout × attempts` for each server, past `audit.postgres_timeout_ms` and
/// past the drain's cutoff. So the names a conninfo gives are looked up
/// first, within the bound, and the connect is given the addresses as
/// `hostaddr` beside the names (which TLS still checks and `.pgpass` still
/// matches): `host=db,db hostaddr=10.0.0.1,10.0.0.2`, one entry per address,
/// which libpq tries in turn as it would its own lookup's. A list of servers
/// (`host=a,b port=5432,5433`, for a standby to fall back on) is expanded
/// server by server, in its order, each address keeping its server's port.
struct PostgresConninfo {
    /// Every option the conninfo sets (libpq's keywords), in libpq's order.
    var options: [(keyword: String, value: String)]

    /// Parsed by libpq (`PQconninfoParse`: key/value or URI form); nil when
    /// libpq refuses it (the connect then reports why).
    init?(_ conninfo: String) {
        guard let parsed = PQconninfoParse(conninfo, nil) else { return nil }
        defer { PQconninfoFree(parsed) }
        var options: [(keyword: String, value: String)] = []
        var option = parsed
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val { options.append((String(cString: keyword), String(cString: value))) }
            option += 1
        }
        self.options = options
    }

    func value(_ keyword: String) -> String? {
        options.first { $0.keyword == keyword }?.value
    }

    /// One server of the conninfo's `host` list, with its `port`.
    struct Server: Equatable {
        /// A name, a numeric address, a socket directory, or empty (libpq's default).
        var host: String
        /// Its entry of the `port` list (one port for all, or one each); nil: none given.
        var port: String?
        /// A name or address to look up before the connect (not a socket directory, not empty).
        var looksUp: Bool { !host.isEmpty && !host.hasPrefix("/") && !host.hasPrefix("@") }
    }

    /// A server and what its lookup found: nil for a server not looked up
    /// (a socket directory), or for one whose lookup failed or did not answer.
    struct Resolved {
        var server: Server
        var addresses: [HostLookup.Address]?
    }

    /// The servers to look up before the connect, in the conninfo's order:
    /// nil when none needs a lookup (libpq's default: the Unix socket, or
    /// `PGHOST`; socket directories), when `hostaddr` is given already, or
    /// when the `port` list matches neither one port nor one per host (libpq
    /// refuses that conninfo itself and says why).
    var serversToLookUp: [Server]? {
        guard value("hostaddr")?.isEmpty ?? true, let host = value("host"), !host.isEmpty else { return nil }
        let hosts = host.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        let ports = value("port").map { $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init) } ?? []
        guard ports.count <= 1 || ports.count == hosts.count else { return nil }
        let servers = hosts.enumerated().map { index, host in
            Server(host: host, port: ports.isEmpty ? nil : ports[ports.count == 1 ? 0 : index])
        }
        return servers.contains(where: \.looksUp) ? servers : nil
    }

    /// The conninfo's options with its servers replaced by what their lookups
    /// found: each looked-up server once per address, the address as its
    /// `hostaddr` and its name as its `host`; a server not looked up as it
    /// was (an empty `hostaddr`); a server whose lookup found nothing left
    /// out, as libpq leaves out a name it cannot look up. Nil when no server is left.
    func connectParameters(_ resolved: [Resolved]) -> [(keyword: String, value: String)]? {
        var hosts: [String] = [], addresses: [String] = [], ports: [String] = []
        for entry in resolved {
            if !entry.server.looksUp {
                hosts.append(entry.server.host)
                addresses.append("")
                ports.append(entry.server.port ?? "")
                continue
            }
            for address in entry.addresses ?? [] {
                hosts.append(entry.server.host)
                addresses.append(address.numericHost)
                ports.append(entry.server.port ?? "")
            }
        }
        guard !hosts.isEmpty else { return nil }
        var pairs = options.filter { $0.keyword != "host" && $0.keyword != "hostaddr" && $0.keyword != "port" }
        pairs.append(("host", hosts.joined(separator: ",")))
        pairs.append(("hostaddr", addresses.joined(separator: ",")))
        // An empty entry is libpq's default port; none given stays none (PGPORT).
        if ports.contains(where: { !$0.isEmpty }) { pairs.append(("port", ports.joined(separator: ","))) }
        return Self.requiringWrites(pairs, entries: hosts.count)
    }

    /// How many servers libpq may try for this conninfo as it is: entries
    /// of its `host` list, or of its `hostaddr` list when that is longer.
    var entries: Int {
        ["host", "hostaddr"].map { keyword in
            value(keyword).map { $0.split(separator: ",", omittingEmptySubsequences: false).count } ?? 0
        }.max() ?? 0
    }

    /// `pairs` with `target_session_attrs=read-write` added when libpq may
    /// try more than one server (`entries`) and neither the conninfo nor
    /// `PGTARGETSESSIONATTRS` says which it takes.
    ///
    /// libpq's default takes the first server that answers, a read-only
    /// standby included; every connection here writes (audit rows,
    /// idempotency keys, migrations) or reads what was just written, so a
    /// standby first in the list (an old primary come back after a
    /// failover) would have every COPY refused, and the rows would wait in
    /// the spool while the new primary sat further down the list. With
    /// read-write, libpq passes over a server that does not accept writes
    /// and tries the next. A conninfo that sets `target_session_attrs`
    /// itself (`any`, say) keeps it.
    static func requiringWrites(
        _ pairs: [(keyword: String, value: String)], entries: Int,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> [(keyword: String, value: String)] {
        guard entries > 1, !pairs.contains(where: { $0.keyword == "target_session_attrs" }),
              environment["PGTARGETSESSIONATTRS"]?.isEmpty ?? true
        else { return pairs }
        return pairs + [("target_session_attrs", "read-write")]
    }

    /// Starts libpq's non-blocking connect with `pairs` (``connectParameters(_:)``).
    static func startConnect(_ pairs: [(keyword: String, value: String)]) -> OpaquePointer? {
        // libpq copies what it keeps; the C strings live through the call.
        let keywords = pairs.map { strdup($0.keyword) }
        let values = pairs.map { strdup($0.value) }
        defer {
            keywords.forEach { free($0) }
            values.forEach { free($0) }
        }
        let keywordList = keywords.map { UnsafePointer($0) } + [nil]
        let valueList = values.map { UnsafePointer($0) } + [nil]
        return PQconnectStartParams(keywordList, valueList, 0)
    }
}
