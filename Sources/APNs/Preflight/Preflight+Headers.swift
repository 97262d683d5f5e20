extension Preflight {
    /// A header name must be an RFC 9110 token in lowercase (RFC 9113 §8.2.1:
    /// HTTP/2 refuses uppercase names; nghttp2 refuses the request outright).
    ///
    /// A name APNs cannot take would otherwise be sent, reset by the peer,
    /// retried, and reported as a transport failure that looks like an outage.
    public static func checkHeaderName(_ name: String, apnsID: APNsID? = nil) throws(APNsError) {
        let bytes = name.utf8
        guard !bytes.isEmpty else {
            throw APNsError.preflight(.invalidHeader, field: "headers", rule: "header names must not be empty", apnsID: apnsID)
        }
        if let bad = bytes.first(where: { !isLowercaseTokenByte($0) }) {
            throw APNsError.preflight(
                .invalidHeader, field: printable(name),
                rule: "header names must be lowercase letters, digits and !#$%&'*+-.^_`|~ (found \(describe(bad)))",
                apnsID: apnsID)
        }
    }

    /// Why `value` cannot be a header value APNs accepts, or nil when it can.
    ///
    /// Visible ASCII and spaces only, no space at either end: RFC 9113 §8.2.1
    /// forbids NUL, CR and LF and RFC 9110 §5.5 the other controls; APNs'
    /// headers (ids, topics, numbers) are all ASCII, so anything else is a bug
    /// or an attack, never a value APNs would deliver.
    public static func headerValueRule(_ value: String) -> String? {
        let bytes = Array(value.utf8)
        if let index = bytes.firstIndex(where: { !(0x20...0x7E).contains($0) }) {
            return "must hold only visible ASCII characters and spaces (found \(describe(bytes[index])) at byte \(index))"
        }
        if bytes.first == 0x20 || bytes.last == 0x20 { return "must not start or end with a space" }
        return nil
    }

    /// Fails with `code` when `value` is not a header value APNs accepts.
    public static func checkHeaderValue(
        _ value: String, field: String, code: APNsError.Code = .invalidHeader, apnsID: APNsID? = nil
    ) throws(APNsError) {
        if let rule = headerValueRule(value) {
            throw APNsError.preflight(code, field: field, rule: rule, apnsID: apnsID)
        }
    }

    /// A caller-supplied `apns-topic` must be shaped like a bundle id and
    /// belong to the app the send is for: its bundle id, bare or with one of
    /// the suffixes Apple documents per push type (`.voip`, `.complication`,
    /// `.pushkit.fileprovider`, `.push-type.liveactivity`, …).
    ///
    /// Apps that share a team key could otherwise push to each other's
    /// topics: APNs accepts any topic the key's team owns, and the send would
    /// be audited under the wrong app (403, `TopicNotForApp`).
    public static func checkTopic(_ topic: String, bundleID: String, field: String = "apns-topic", apnsID: APNsID? = nil)
        throws(APNsError)
    {
        if topic.isEmpty { throw APNsError.preflight(.missingTopic, field: field, rule: "must not be empty", apnsID: apnsID) }
        if let bad = topic.utf8.first(where: { !($0.isASCIIAlphanumeric || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-")) }) {
            throw APNsError.preflight(
                .badTopic, field: field, rule: "must be a bundle id: letters, digits, '.' and '-' only (found \(describe(bad)))",
                apnsID: apnsID)
        }
        if topic.utf8.count > 255 {
            throw APNsError.preflight(.badTopic, field: field, rule: "must be at most 255 bytes (is \(topic.utf8.count))", apnsID: apnsID)
        }
        if isAllowed(topic, bundleID: bundleID) { return }
        throw APNsError.preflight(
            .topicNotForApp, field: field,
            rule: "must be this app's bundle id \(bundleID), bare or with a push-type suffix "
                + "(\(suffixes.joined(separator: ", "))); \(topic) is not one of them",
            apnsID: apnsID)
    }

    /// Whether `topic` is one of ``allowedTopics(forBundleID:)``, decided
    /// without building that set per send: `topic` (letters, digits, '.'
    /// and '-' by now) is compared byte for byte as the bundle id followed by
    /// a push type's suffix. A bundle id that is not ASCII takes the set,
    /// where `String`'s canonical equivalence decides as it always did.
    static func isAllowed(_ topic: String, bundleID: String) -> Bool {
        guard bundleID.utf8.allSatisfy({ $0 < 0x80 }) else { return allowedTopics(forBundleID: bundleID).contains(topic) }
        let utf8 = topic.utf8
        guard utf8.starts(with: bundleID.utf8) else { return false }
        let suffix = utf8.dropFirst(bundleID.utf8.count)
        return PushType.allCases.contains { $0.topicSuffix.utf8.elementsEqual(suffix) }
    }

    /// Every topic a send for `bundleID` may carry.
    public static func allowedTopics(forBundleID bundleID: String) -> Set<String> {
        Set(PushType.allCases.map { $0.topic(forBundleID: bundleID) })
    }

    private static var suffixes: [String] {
        var seen = Set<String>()
        return PushType.allCases.map(\.topicSuffix).filter { !$0.isEmpty && seen.insert($0).inserted }
    }

    static func isLowercaseTokenByte(_ byte: UInt8) -> Bool {
        if (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
            return true
        }
        return Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
    }

    /// `'x'` for a visible character, `byte 0x0d` for anything else.
    static func describe(_ byte: UInt8) -> String {
        (0x21...0x7E).contains(byte) ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x\(byte < 16 ? "0" : "")\(String(byte, radix: 16))"
    }

    /// `text` with every byte outside visible ASCII shown as `\xNN`, for a field name.
    static func printable(_ text: String) -> String {
        var output = ""
        for byte in text.utf8 {
            if (0x21...0x7E).contains(byte) {
                output.append(Character(Unicode.Scalar(byte)))
            } else {
                output += "\\x\(byte < 16 ? "0" : "")\(String(byte, radix: 16))"
            }
        }
        return output
    }
}
