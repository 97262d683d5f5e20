internal import CLibPQ
import Glibc
import RelayBasics

/// A conninfo string as libpq parses it, for a connect whose host name is
/// looked up by the relay (``HostLookup``) rather than by libpq.
///
/// libpq's non-blocking connect still looks the host name up with a blocking
/// `getaddrinfo` inside `PQconnectStart`/`PQconnectPoll`: against a resolver
/// that does not answer, a bounded connect waited as long as resolv.conf's
/// `timeout × attempts` for each server, past `audit.postgres_timeout_ms` and
/// past the drain's cutoff. So a conninfo that names one host by name has
/// that name looked up first, within the bound, and the connect is given
/// the addresses as `hostaddr` beside the name (which TLS still checks and
/// `.pgpass` still matches): `host=db,db hostaddr=10.0.0.1,10.0.0.2`, one
/// entry per address, which libpq tries in turn as it would its own lookup's.
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

    /// The host name to look up before the connect: one host, given by
    /// name. Nil for none (libpq's default: the Unix socket, or `PGHOST`),
    /// a socket directory, a numeric address, a `hostaddr` already given, or
    /// several hosts (looked up by libpq, unbounded: the documented limit).
    var hostNameToLookUp: String? {
        guard value("hostaddr")?.isEmpty ?? true, let host = value("host"), !host.isEmpty else { return nil }
        guard !host.contains(","), !host.hasPrefix("/"), !host.hasPrefix("@") else { return nil }
        return host
    }

    /// Starts libpq's non-blocking connect to `addresses`, the lookup of
    /// ``hostNameToLookUp``: the conninfo's options with the name repeated
    /// once per address and the addresses as `hostaddr`.
    func startConnect(to addresses: [HostLookup.Address], of host: String) -> OpaquePointer? {
        var pairs = options.filter { $0.keyword != "host" && $0.keyword != "hostaddr" }
        pairs.append(("host", Array(repeating: host, count: addresses.count).joined(separator: ",")))
        pairs.append(("hostaddr", addresses.map(\.numericHost).joined(separator: ",")))
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
