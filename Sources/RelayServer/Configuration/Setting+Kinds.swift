extension Setting {
    typealias Field<Value> = WritableKeyPath<ServerConfiguration, Value> & Sendable

    /// A value read by `parse` into `field` and shown by `show`: every other
    /// kind is one of these.
    ///
    /// - Parameters:
    ///   - variable: the environment variable that wins over the file; `fromVariable`
    ///     turns its text into the value (nil: leave the file's).
    ///   - unset: what check-config shows while the value is unset (`show` gives nil); nil: no line.
    ///   - comment: a comment check-config adds after the value.
    ///   - shownWhen: check-config shows the setting only when this holds.
    static func scalar<Value>(
        _ path: String, _ field: Field<Value>, type: String, secrecy: Secrecy = .none,
        variable: String? = nil, default documentedDefault: String? = nil, _ summary: String,
        parse: @escaping @Sendable (inout ConfigurationReader, String, Context) throws(ConfigurationError) -> Value?,
        fromVariable: (@Sendable (String, String) throws(ConfigurationError) -> Value?)? = nil,
        show: @escaping @Sendable (Value) -> String?,
        unset: String? = nil,
        comment: @escaping @Sendable (ServerConfiguration) -> String? = { _ in nil },
        shownWhen: @escaping @Sendable (ServerConfiguration) -> Bool = { _ in true }
    ) -> Setting {
        let key = path.split(separator: ".").last.map(String.init) ?? path
        let value: @Sendable (ServerConfiguration) -> String? = { configuration in
            show(configuration[keyPath: field]).map { secrecy == .password ? ServerConfiguration.maskPassword($0) : $0 }
        }
        var override: Override?
        if let variable, let fromVariable {
            override = { configuration, environment throws(ConfigurationError) in
                if let text = environment[variable], let new = try fromVariable(text, variable) { configuration[keyPath: field] = new }
            }
        }
        return Setting(
            path: path, type: type, variables: variable.map { [$0] } ?? [], secrecy: secrecy, documentedDefault: documentedDefault,
            summary: summary,
            read: { configuration, reader, context throws(ConfigurationError) in
                if let new = try parse(&reader, key, context) { configuration[keyPath: field] = new }
            },
            override: override, value: value,
            describe: { configuration in
                guard shownWhen(configuration), let text = value(configuration) ?? unset else { return [] }
                return ["\(key): \(text)" + (comment(configuration).map { "  # \($0)" } ?? "")]
            })
    }

    /// A whole number in `range`.
    static func integer(
        _ path: String, _ field: Field<Int>, in range: ClosedRange<Int>, _ summary: String,
        comment: @escaping @Sendable (ServerConfiguration) -> String? = { _ in nil },
        shownWhen: @escaping @Sendable (ServerConfiguration) -> Bool = { _ in true }
    ) -> Setting {
        scalar(
            path, field, type: Self.range(range, "whole number"), summary, parse: { reader, key, _ throws(ConfigurationError) in try reader.integer(key, in: range) },
            show: { String($0) }, comment: comment, shownWhen: shownWhen)
    }

    /// A whole number in `range`, or unset (check-config shows `unset`).
    static func integer(_ path: String, _ field: Field<Int?>, in range: ClosedRange<Int>, unset: String, default documentedDefault: String? = nil, _ summary: String) -> Setting {
        scalar(
            path, field, type: Self.range(range, "whole number"), default: documentedDefault, summary,
            parse: { reader, key, _ throws(ConfigurationError) in try reader.integer(key, in: range).map { Optional($0) } },
            show: { $0.map(String.init) }, unset: unset)
    }

    /// A whole number of milliseconds in `range`, kept in seconds.
    static func milliseconds(_ path: String, _ field: Field<Double>, in range: ClosedRange<Int>, _ summary: String) -> Setting {
        scalar(
            path, field, type: Self.range(range, "whole number"), summary,
            parse: { reader, key, _ throws(ConfigurationError) in try reader.integer(key, in: range).map { Double($0) / 1000 } },
            show: { String(Int($0 * 1000)) })
    }

    /// A number in `range`.
    static func number(
        _ path: String, _ field: Field<Double>, in range: ClosedRange<Double>, _ summary: String,
        shownWhen: @escaping @Sendable (ServerConfiguration) -> Bool = { _ in true }
    ) -> Setting {
        scalar(
            path, field, type: Self.range(range, "number"), summary, parse: { reader, key, _ throws(ConfigurationError) in try reader.number(key, in: range) },
            show: { String($0) }, shownWhen: shownWhen)
    }

    /// `true` or `false`.
    static func flag(
        _ path: String, _ field: Field<Bool>, _ summary: String,
        comment: @escaping @Sendable (ServerConfiguration) -> String? = { _ in nil },
        shownWhen: @escaping @Sendable (ServerConfiguration) -> Bool = { _ in true }
    ) -> Setting {
        scalar(
            path, field, type: "true or false", summary, parse: { reader, key, _ throws(ConfigurationError) in try reader.bool(key) },
            show: { String($0) }, comment: comment, shownWhen: shownWhen)
    }

    /// One of an enumeration's raw values; anything else is refused with `refusal(text)`.
    static func choice<Value: RawRepresentable<String> & Sendable>(
        _ path: String, _ field: Field<Value>, _ values: [Value], variable: String? = nil, _ summary: String,
        refusal: @escaping @Sendable (String) -> String,
        comment: @escaping @Sendable (ServerConfiguration) -> String? = { _ in nil }
    ) -> Setting {
        @Sendable func parse(_ text: String, field name: String) throws(ConfigurationError) -> Value {
            guard let value = Value(rawValue: text) else { throw ConfigurationError(field: name, refusal(text)) }
            return value
        }
        return scalar(
            path, field, type: "one of " + values.map(\.rawValue).joined(separator: ", "), variable: variable, summary,
            parse: { reader, key, _ throws(ConfigurationError) in try reader.string(key).map { text throws(ConfigurationError) in try parse(text, field: reader.name(key)) } },
            fromVariable: { text, name throws(ConfigurationError) in text.isEmpty ? nil : try parse(text, field: name) },
            show: { $0.rawValue }, comment: comment)
    }

    /// `host:port` (`*` for every address; `[v6]:port`); a non-empty variable wins.
    static func address(_ path: String, _ field: Field<ServerConfiguration.Address>, variable: String, _ summary: String) -> Setting {
        scalar(
            path, field, type: "host:port", variable: variable, summary,
            parse: { reader, key, _ throws(ConfigurationError) in
                try reader.string(key).map { text throws(ConfigurationError) in try ServerConfiguration.Address(parsing: text, field: reader.name(key)) }
            },
            fromVariable: { text, name throws(ConfigurationError) in text.isEmpty ? nil : try ServerConfiguration.Address(parsing: text, field: name) },
            show: { $0.description })
    }

    /// A string taken as it is; a non-empty variable wins.
    static func text(_ path: String, _ field: Field<String>, variable: String?, type: String = "string", default documentedDefault: String? = nil, _ summary: String) -> Setting {
        scalar(
            path, field, type: type, variable: variable, default: documentedDefault, summary,
            parse: { reader, key, _ throws(ConfigurationError) in try reader.string(key) },
            fromVariable: { text, _ in text.isEmpty ? nil : text },
            show: { $0 })
    }

    /// A file's path, relative to the configuration file's directory.
    static func file(
        _ path: String, _ field: Field<String?>, unset: String?, _ summary: String,
        shownWhen: @escaping @Sendable (ServerConfiguration) -> Bool = { _ in true }
    ) -> Setting {
        scalar(
            path, field, type: "file path (relative: to the file's directory)", summary,
            parse: { reader, key, context throws(ConfigurationError) in
                try reader.string(key).map { Optional(ServerConfiguration.resolve($0, against: context.directory)) }
            },
            show: { $0 }, unset: unset, shownWhen: shownWhen)
    }

    /// The docs' "type and range": `whole number, 1 to 64`.
    static func range<Bound>(_ range: ClosedRange<Bound>, _ kind: String) -> String {
        "\(kind), \(range.lowerBound) to \(range.upperBound)"
    }
}
