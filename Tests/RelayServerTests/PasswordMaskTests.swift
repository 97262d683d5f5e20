@testable import Audit
import Foundation
import RelayServer
import Testing

/// A database URL shown by `apns-relay config` (and the demo) has its
/// password masked, in every form libpq reads: the oracle is libpq's own
/// parser (`PQconninfoParse`, through ``PostgresConninfo``), which must read
/// the masked text as the same options with the password `****`, and the
/// password must appear nowhere in it.
@Suite("Database URL password masking")
struct PasswordMaskTests {
    /// libpq's options of `conninfo`, by keyword.
    static func options(_ conninfo: String) throws -> [String: String] {
        let parsed = try #require(PostgresConninfo(conninfo), "libpq does not read \(conninfo)")
        return Dictionary(parsed.options.map { ($0.keyword, $0.value) }, uniquingKeysWith: { $1 })
    }

    /// The masked text reads as the same options, the password `****`, and holds no trace of `password`.
    static func expectMasked(_ conninfo: String, password: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let masked = ServerConfiguration.maskPassword(conninfo)
        #expect(!masked.contains(password), "\(masked)", sourceLocation: sourceLocation)
        var expected = try options(conninfo)
        #expect(expected["password"] == password, "libpq reads another password from \(conninfo)", sourceLocation: sourceLocation)
        expected["password"] = "****"
        #expect(try options(masked) == expected, "\(conninfo) -> \(masked)", sourceLocation: sourceLocation)
    }

    @Test("each form libpq reads: the user info, a password query parameter, key/value with spaces and quotes, server lists")
    func forms() throws {
        try Self.expectMasked("postgres://relay:s3cret@db/audit", password: "s3cret")
        try Self.expectMasked("postgresql://relay:s3cret@a.example:5432,b.example:5433/audit?target_session_attrs=read-write", password: "s3cret")
        try Self.expectMasked("postgresql://relay@db/audit?sslmode=disable&password=s3cret", password: "s3cret")
        try Self.expectMasked("postgresql://relay@db/audit?pass%77ord=s3cret", password: "s3cret")
        try Self.expectMasked("postgresql://relay:p%40ss%2Fw@db/audit", password: "p@ss/w")
        try Self.expectMasked("host=db user=relay password=s3cret dbname=audit", password: "s3cret")
        try Self.expectMasked("host=db password = s3cret dbname=audit", password: "s3cret")
        try Self.expectMasked("host=db password='two words' dbname=audit", password: "two words")
        try Self.expectMasked(#"password = 'it\'s a \\ secret' host=db"#, password: #"it's a \ secret"#)
        try Self.expectMasked("host=a.example,b.example port=5432,5433 password=s3cret", password: "s3cret")
        try Self.expectMasked("password= host=db", password: "host=db")
        // A `://` inside a key/value value does not make the conninfo a URI.
        try Self.expectMasked("password=s3cret options='-c search_path=x://y'", password: "s3cret")
        try Self.expectMasked("host=db application_name=a://b password=s3cret", password: "s3cret")
        // The display as it was, where there is no password.
        #expect(ServerConfiguration.maskPassword("postgresql://db:5432/audit?application_name=a@b") == "postgresql://db:5432/audit?application_name=a@b")
        #expect(ServerConfiguration.maskPassword("host=db dbname=audit") == "host=db dbname=audit")
        #expect(ServerConfiguration.maskPassword("postgres://relay@db/audit") == "postgres://relay@db/audit")
    }

    @Test("a key/value conninfo libpq cannot read is masked whole: where its password ends is not known")
    func unreadable() {
        for conninfo in ["host=db password s3cret", "host=db password='s3cret", "password"] {
            #expect(ServerConfiguration.maskPassword(conninfo) == "****", "\(conninfo)")
            #expect(PostgresConninfo(conninfo) == nil, "libpq reads \(conninfo)")
        }
    }

    @Test("generated passwords with spaces, quotes, backslashes, = and @, in either form: libpq reads the masked text as the same options")
    func generated() throws {
        var generator = SeededGenerator(seed: 26)
        let alphabet = Array(#"abcXYZ019 '\=@:/?&%"#)
        for _ in 0..<300 {
            let password = String((0..<Int.random(in: 4...14, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! })
            // Long enough and unlike the rest of the text, so "appears nowhere" means something.
            let marked = "Zq" + password + "Qz"
            let quoted = "'" + marked.replacingOccurrences(of: #"\"#, with: #"\\"#).replacingOccurrences(of: "'", with: #"\'"#) + "'"
            let encoded = marked.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            try Self.expectMasked("host=db user=relay password=\(quoted) dbname=audit", password: marked)
            try Self.expectMasked("host=db password = \(quoted)", password: marked)
            try Self.expectMasked("postgresql://relay:\(encoded)@db:5432/audit", password: marked)
            try Self.expectMasked("postgresql://relay@db/audit?application_name=x&password=\(encoded)", password: marked)
        }
    }
}

/// SplitMix64: the same cases on every run.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
