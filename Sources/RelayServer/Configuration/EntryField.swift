/// One field of a list entry of the configuration (`apps[]`, `api_keys[]`),
/// declared once: its key, what it accepts, how it is read into the entry
/// being built (a `Draft`), and check-config's lines for it (from the
/// built `Entry`). The entry's parser, check-config's description and the
/// settings table's type (`list of {…}`) are walks over its fields, so a new
/// field is one row, plus the component that uses it.
///
/// Fields are read in their order: a later field may use an earlier one's
/// value (an app's credentials are overridden by variables named after its
/// name). Checks across fields (a key's hash, a burst that follows the rate)
/// run once every field is read, where the entry is built.
struct EntryField<Draft, Entry>: Sendable {
    typealias Read = @Sendable (inout Draft, inout ConfigurationReader, Setting.Context) throws(ConfigurationError) -> Void

    /// The field's key in the entry.
    let key: String
    let read: Read
    /// check-config's lines, relative to the entry (`key: value`; nested
    /// lines indented by two more); empty: not shown for this entry.
    let describe: @Sendable (Entry) -> [String]

    init(_ key: String, read: @escaping Read, describe: @escaping @Sendable (Entry) -> [String]) {
        self.key = key
        self.read = read
        self.describe = describe
    }

    /// A field shown as one `key: value` line.
    init(_ key: String, read: @escaping Read, shown value: @escaping @Sendable (Entry) -> String) {
        self.init(key, read: read, describe: { ["\(key): \(value($0))"] })
    }
}

extension Array {
    /// The settings table's type of a list of such entries: `list of {name, …}`.
    func entryType<Draft, Entry>() -> String where Element == EntryField<Draft, Entry> {
        "list of {" + map(\.key).joined(separator: ", ") + "}"
    }

    /// Reads every field in order from `reader` into `draft`, then rejects keys no field reads.
    func read<Draft, Entry>(into draft: inout Draft, from reader: inout ConfigurationReader, _ context: Setting.Context) throws(ConfigurationError)
    where Element == EntryField<Draft, Entry> {
        for field in self { try field.read(&draft, &reader, context) }
        try reader.rejectUnknown()
    }

    /// check-config's lines for one entry of a list: `  - ` before its first line, four blanks before the others.
    func describe<Draft, Entry>(_ entry: Entry) -> [String] where Element == EntryField<Draft, Entry> {
        flatMap { $0.describe(entry) }.enumerated().map { index, line in (index == 0 ? "  - " : "    ") + line }
    }
}
