import APNs
import Foundation
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

    /// A conninfo with its password masked, in either of libpq's forms:
    /// `postgres://user:secret@host/db` → `postgres://user:****@host/db`
    /// (a `password=` query parameter too: `?password=****`), and
    /// `host=x password=secret` → `host=x password=****` (spaces around `=`
    /// and a quoted value, `password = 'a b\'c'`, as libpq reads them).
    /// A key/value conninfo libpq could not read is masked whole: where its
    /// password ends is not known, so none of it is shown.
    public static func maskPassword(_ conninfo: String) -> String {
        let text = Array(conninfo.utf8)
        // A URI only when it starts with a scheme (`postgresql://`, an
        // endpoint's `https://`): a `://` inside a key/value value is not one.
        guard let scheme = conninfo.range(of: "://"), isScheme(conninfo[..<scheme.lowerBound]) else {
            return maskKeywordPassword(text) ?? "****"
        }
        let start = conninfo.utf8.distance(from: conninfo.utf8.startIndex, to: scheme.upperBound)
        return String(decoding: maskURIPassword(text, after: start), as: UTF8.self)
    }

    /// RFC 3986's scheme: a letter, then letters, digits, `+`, `-` and `.`.
    private static func isScheme(_ text: Substring) -> Bool {
        func isLetter(_ scalar: Unicode.Scalar) -> Bool { ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) }
        guard let first = text.unicodeScalars.first, isLetter(first) else { return false }
        return text.unicodeScalars.allSatisfy { isLetter($0) || ("0"..."9").contains($0) || "+-.".unicodeScalars.contains($0) }
    }

    /// The URI form: the user info's password (the user info ends at the
    /// first `@` before any `/` or `?`, as libpq reads it) and every
    /// `password` query parameter.
    private static func maskURIPassword(_ text: [UInt8], after start: Int) -> [UInt8] {
        var masked = Array(text[..<start])
        var index = start
        let authorityEnd = text[start...].firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") } ?? text.endIndex
        if let at = text[start..<authorityEnd].firstIndex(of: UInt8(ascii: "@")) {
            if let colon = text[start..<at].firstIndex(of: UInt8(ascii: ":")) {
                masked += text[start...colon] + [UInt8]("****".utf8)
            } else {
                masked += text[start..<at]
            }
            index = at
        }
        guard let question = text[index...].firstIndex(of: UInt8(ascii: "?")) else { return masked + text[index...] }
        masked += text[index...question]
        let parameters = text[(question + 1)...].split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: false)
        for (number, parameter) in parameters.enumerated() {
            if number > 0 { masked.append(UInt8(ascii: "&")) }
            let name = parameter.prefix { $0 != UInt8(ascii: "=") }
            // Percent-decoded, as libpq decodes a parameter's name.
            let decoded = String(decoding: name, as: UTF8.self).removingPercentEncoding ?? String(decoding: name, as: UTF8.self)
            if decoded == "password", name.count < parameter.count {
                masked += name + [UInt8]("=****".utf8)
            } else {
                masked += parameter
            }
        }
        return masked
    }

    /// The key/value form, read as libpq reads it: `keyword = value`,
    /// spaces around `=` optional, a value quoted with `'` (`\'` and `\\`
    /// inside) or running to the next space. Nil when it cannot be read.
    private static func maskKeywordPassword(_ text: [UInt8]) -> String? {
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || (0x09...0x0D).contains(byte) }
        var masked: [UInt8] = []
        var index = 0
        while index < text.count {
            if isSpace(text[index]) {
                masked.append(text[index])
                index += 1
                continue
            }
            let keywordStart = index
            while index < text.count, !isSpace(text[index]), text[index] != UInt8(ascii: "=") { index += 1 }
            let keyword = text[keywordStart..<index]
            while index < text.count, isSpace(text[index]) { index += 1 }
            guard index < text.count, text[index] == UInt8(ascii: "=") else { return nil }
            index += 1
            while index < text.count, isSpace(text[index]) { index += 1 }
            masked += text[keywordStart..<index]
            let isPassword = String(decoding: keyword, as: UTF8.self).lowercased() == "password"
            if index < text.count, text[index] == UInt8(ascii: "'") {
                let valueStart = index
                index += 1
                var closed = false
                while index < text.count {
                    if text[index] == UInt8(ascii: "\\") {
                        index += 2
                        continue
                    }
                    if text[index] == UInt8(ascii: "'") {
                        closed = true
                        index += 1
                        break
                    }
                    index += 1
                }
                guard closed else { return nil }
                if isPassword { masked += [UInt8]("'****'".utf8) } else { masked += text[valueStart..<index] }
            } else {
                let valueStart = index
                while index < text.count, !isSpace(text[index]) { index += 1 }
                if isPassword { masked += [UInt8]("****".utf8) } else { masked += text[valueStart..<index] }
            }
        }
        return String(decoding: masked, as: UTF8.self)
    }
}

extension String {
    func leftPadded(to width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
