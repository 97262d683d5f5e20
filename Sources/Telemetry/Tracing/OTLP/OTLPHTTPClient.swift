import RelayBasics

/// POSTs encoded requests to the collector over HTTP/1.1, one at a time, on
/// the exporter's thread; the connection is kept for the next batch while
/// the collector keeps it open.
///
/// Headers (`OTEL_EXPORTER_OTLP_HEADERS`) are credentials: they go on the
/// wire and nowhere else; failures name the endpoint and the status only.
final class OTLPHTTPClient {
    let endpoint: OTLPEndpoint
    private let opener: any OTLPStreamOpener
    /// Everything before the content-length value, encoded once.
    private let head: [UInt8]
    private var stream: (any OTLPStream)?
    private var request: [UInt8] = []
    private var response: [UInt8] = []

    init(endpoint: OTLPEndpoint, headers: [(String, String)], opener: any OTLPStreamOpener) {
        self.endpoint = endpoint
        self.opener = opener
        var text = "POST \(endpoint.path) HTTP/1.1\r\nhost: \(endpoint.hostHeader)\r\n"
        text += "content-type: application/x-protobuf\r\nuser-agent: apns-relay\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        text += "content-length: "
        head = Array(text.utf8)
    }

    /// Sends `body` and reads the answer, all before `deadline`.
    func post(_ body: [UInt8], deadline: OTLPDeadline) -> Result<Void, OTLPExportFailure> {
        request.removeAll(keepingCapacity: true)
        request.append(contentsOf: head)
        request.append(contentsOf: String(body.count).utf8)
        request.append(contentsOf: "\r\n\r\n".utf8)
        request.append(contentsOf: body)
        // A kept connection the collector closed meanwhile fails at once: one
        // more try on a fresh one, which is not a retry of the export.
        let reused = stream != nil
        let first = exchange(deadline: deadline)
        if case .failure(let failure) = first, reused, failure.description == Self.closedByPeer, !deadline.hasPassed {
            return exchange(deadline: deadline)
        }
        return first
    }

    func close() {
        stream?.close()
        stream = nil
    }

    private static let closedByPeer = "the collector closed the connection before answering"

    private func exchange(deadline: OTLPDeadline) -> Result<Void, OTLPExportFailure> {
        let connection: any OTLPStream
        if let stream {
            connection = stream
        } else {
            switch opener.open(endpoint, deadline: deadline) {
            case .success(let opened): connection = opened
            case .failure(let failure): return .failure(failure)
            }
            stream = connection
        }
        let wrote = request.withUnsafeBytes { connection.write($0, deadline: deadline) }
        guard wrote else {
            close()
            let late = deadline.hasPassed
            return .failure(OTLPExportFailure(late ? "the collector did not take the request in time" : Self.closedByPeer, retryable: true))
        }
        switch readAnswer(connection, deadline: deadline) {
        case .failure(let failure):
            close()
            return .failure(failure)
        case .success(let (status, keep)):
            if !keep { close() }
            if (200..<300).contains(status) { return .success(()) }
            let retryable = [429, 502, 503, 504].contains(status)
            return .failure(OTLPExportFailure("the collector answered \(status)", retryable: retryable))
        }
    }

    /// The answer's status, and whether the connection may be used again.
    private func readAnswer(_ connection: any OTLPStream, deadline: OTLPDeadline) -> Result<(Int, Bool), OTLPExportFailure> {
        response.removeAll(keepingCapacity: true)
        var chunk = [UInt8](repeating: 0, count: 4096)
        var headerEnd: Int?
        while headerEnd == nil {
            guard let count = chunk.withUnsafeMutableBytes({ connection.read(into: $0, deadline: deadline) }) else {
                return .failure(OTLPExportFailure("the collector did not answer in time", retryable: true))
            }
            if count == 0 {
                return .failure(OTLPExportFailure(response.isEmpty ? Self.closedByPeer : "the collector's answer ended early", retryable: true))
            }
            response.append(contentsOf: chunk[0..<count])
            headerEnd = Self.headerEnd(response)
            if headerEnd == nil && response.count > 64 << 10 {
                return .failure(OTLPExportFailure("the collector's answer has no end of headers", retryable: false))
            }
        }
        let end = headerEnd!
        let headerText = String(decoding: response[0..<end], as: UTF8.self).lowercased()
        let lines = headerText.split(separator: "\r\n")
        let statusLine = lines.first ?? ""
        let parts = statusLine.split(separator: " ")
        guard parts.count >= 2, parts[0].hasPrefix("http/"), let status = Int(parts[1]) else {
            return .failure(OTLPExportFailure("the collector's answer is not HTTP", retryable: false))
        }
        var keep = parts[0] == "http/1.1"
        var length: Int?
        var chunked = false
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].trimmingSpaces
            let value = line[line.index(after: colon)...].trimmingSpaces
            switch name {
            case "content-length": length = Int(value)
            case "transfer-encoding": chunked = value.contains("chunked")
            case "connection": keep = keep ? !value.contains("close") : value.contains("keep-alive")
            default: break
            }
        }
        // The body (an ExportTraceServiceResponse, maybe partial_success) is
        // read and discarded, only so the connection can be used again; one
        // longer than `answerBodyLimit` is not read at all (the connection
        // is closed instead), and none is held.
        var body = response.count - end
        if chunked {
            var scanner = ChunkedBodyScanner()
            var consumed = response.withUnsafeBytes { scanner.feed(UnsafeRawBufferPointer(rebasing: $0[end...])) }
            var extra = consumed < body
            while !scanner.finished && !scanner.failed {
                guard body <= Self.answerBodyLimit,
                      let count = chunk.withUnsafeMutableBytes({ connection.read(into: $0, deadline: deadline) }), count > 0
                else { return .success((status, false)) }
                consumed = chunk.withUnsafeBytes { scanner.feed(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
                extra = consumed < count
                body += count
            }
            // A malformed body, or bytes after its end: nothing more is read from this connection.
            if scanner.failed || extra { keep = false }
        } else if let length {
            guard length <= Self.answerBodyLimit else { return .success((status, false)) }
            while body < length {
                guard let count = chunk.withUnsafeMutableBytes({ connection.read(into: $0, deadline: deadline) }), count > 0 else {
                    return .success((status, false))
                }
                body += count
            }
        } else {
            // No length: the body ends with the connection.
            keep = false
        }
        return .success((status, keep))
    }

    /// The most of an answer's body read to keep the connection: an
    /// ExportTraceServiceResponse is a few bytes (a partial_success message
    /// at most). A collector that streamed an endless chunked body was read
    /// into memory until the export's deadline.
    static let answerBodyLimit = 64 << 10

    private static func headerEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index + 4
        }
        return nil
    }
}

extension Substring {
    fileprivate var trimmingSpaces: Substring {
        var text = self
        while text.first == " " || text.first == "\t" { text.removeFirst() }
        while text.last == " " || text.last == "\t" { text.removeLast() }
        return text
    }
}
