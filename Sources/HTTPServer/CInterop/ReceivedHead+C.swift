internal import CMicroHTTPD
import RelayBasics

#if canImport(Glibc)
    import Glibc
#endif

/// A request's head as the access handler's first call reads it from
/// libmicrohttpd: method, decoded path and query, headers. A plain record,
/// filled once on MHD's thread and then only read.
struct ReceivedHead {
    var method = ""
    var path = ""
    var headers: [HTTPHeader] = []
    /// ``HTTPRequest/undecodedHeaderValues``.
    var undecodedHeaderValues: [String: [UInt8]] = [:]
    var query: [String: String] = [:]

    /// Fills the record from `connection`'s head. Returns the field whose
    /// percent-escapes do not decode ("path", a query argument's name, or
    /// "query"), nil when everything decoded; the rest is read either way.
    mutating func read(_ connection: OpaquePointer, method: UnsafePointer<CChar>?, url: UnsafePointer<CChar>?) -> String? {
        self.method = method.map { String(cString: $0) } ?? ""
        let headers = collectValues(connection, kind: headerKind)
        self.headers = headers.map { HTTPHeader($0.name, $0.value) }
        for header in headers { if let raw = header.undecoded { undecodedHeaderValues[header.name.lowercasedHeaderName] = raw } }
        var undecodable: String?
        let rawPath = RequestTarget.originPath(url.map { String(cString: $0) } ?? "")
        if let path = RequestTarget.decoded(rawPath) { self.path = path } else { undecodable = "path" }
        for argument in collectValues(connection, kind: queryArgumentKind) {
            guard let name = RequestTarget.decoded(argument.name), let value = RequestTarget.decoded(argument.value) else {
                undecodable = undecodable ?? (RequestTarget.decoded(argument.name) ?? "query")
                continue
            }
            query[name] = value
        }
        return undecodable
    }
}

private let headerKind = MHD_ValueKind(rawValue: 1)!
private let queryArgumentKind = MHD_ValueKind(rawValue: 8)!

/// Collects one kind of connection value (headers, query arguments). The
/// list is sized by libmicrohttpd's count first and filled through a pointer
/// to it: one allocation (none when there are no values), where a box and a
/// list grown one append at a time took four or five per request.
private func collectValues(_ connection: OpaquePointer, kind: MHD_ValueKind) -> [CollectedValue] {
    // With no iterator, libmicrohttpd only counts the values of that kind.
    let count = Int(MHD_get_connection_values(connection, kind, nil, nil))
    guard count > 0 else { return [] }
    var values: [CollectedValue] = []
    values.reserveCapacity(count)
    let iterator: MHD_KeyValueIterator = { context, _, key, value in
        guard let context, let key else { return MHD_Result.YES }
        context.assumingMemoryBound(to: [CollectedValue].self).pointee.append(CollectedValue(name: key, value: value))
        return MHD_Result.YES
    }
    _ = withUnsafeMutablePointer(to: &values) { MHD_get_connection_values(connection, kind, iterator, $0) }
    return values
}

/// One header or query argument, copied out of libmicrohttpd.
private struct CollectedValue {
    var name: String
    /// The value as text; bytes that are not UTF-8 read as U+FFFD.
    var value: String
    /// The value byte for byte when it is not UTF-8 (rare: obs-text, e.g.
    /// Latin-1), so an error can name the byte the client sent, not a byte
    /// of U+FFFD; nil otherwise.
    var undecoded: [UInt8]?

    init(name: UnsafePointer<CChar>, value: UnsafePointer<CChar>?) {
        self.name = String(cString: name)
        guard let value else {
            self.value = ""
            return
        }
        if let text = String(validatingCString: value) {
            self.value = text
        } else {
            self.value = String(cString: value)
            self.undecoded = Array(UnsafeRawBufferPointer(start: value, count: strlen(value)))
        }
    }
}
