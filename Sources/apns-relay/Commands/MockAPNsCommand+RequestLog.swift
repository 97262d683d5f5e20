import Foundation
import MockAPNs
import Synchronization

/// `mock-apns --request-log`: one JSON line per request the mock received,
/// written as it arrives (one `write` per line, so a reader never sees half
/// a line and a SIGKILL of the mock loses nothing already answered).
final class MockRequestLogWriter: Sendable {
    private let handle: Mutex<FileHandle>

    init(path: String) throws {
        if !FileManager.default.fileExists(atPath: path) {
            guard FileManager.default.createFile(atPath: path, contents: nil) else {
                throw MockRequestLogError(path: path)
            }
        }
        guard let handle = FileHandle(forWritingAtPath: path) else { throw MockRequestLogError(path: path) }
        handle.seekToEndOfFile()
        self.handle = Mutex(handle)
    }

    func append(_ entry: MockAPNsLog.Entry) {
        var fields: [String: Any] = [
            "path": entry.request.path,
            "body": String(decoding: entry.request.body, as: UTF8.self),
            "connection": entry.request.connectionID,
        ]
        if let apnsID = entry.apnsID { fields["apnsId"] = apnsID }
        if let status = entry.status { fields["status"] = status }
        if let reason = entry.reason { fields["reason"] = reason }
        guard var line = try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys]) else { return }
        line.append(0x0A)
        handle.withLock { $0.write(line) }
    }
}

/// The request log's file could not be opened for appending.
struct MockRequestLogError: Error, CustomStringConvertible {
    let path: String
    var description: String { "cannot open the request log \(path) for writing" }
}
