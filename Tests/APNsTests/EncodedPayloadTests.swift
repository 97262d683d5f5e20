import APNs
import RelayJSON
import Testing

/// A payload checked and encoded once for many sends (a batch's alerts of
/// one snapshot): the requests are those built from the JSON itself.
@Suite("Request builder: a payload encoded once")
struct EncodedPayloadTests {
    static let payload: JSONValue = ["aps": ["alert": ["title": "Hi \"you\"", "body": "Thére"], "sound": "default"], "liveSurface": ["n": 1]]

    @Test("alert and notification built from an EncodedPayload equal those built from its JSON, options and all")
    func sameRequests() throws {
        let builder = try fixedBuilder()
        let encoded = try EncodedPayload(Self.payload)
        let options = DeviceSendOptions(priority: .conservePower, expiration: 0, collapseID: "c")
        for token in [deviceToken, String(repeating: "cd", count: 32)] {
            #expect(try builder.alert(token: token, payload: encoded) == builder.alert(token: token, payload: Self.payload))
            #expect(try builder.alert(token: token, payload: encoded, options: options) == builder.alert(token: token, payload: Self.payload, options: options))
            #expect(try builder.notification(token: token, payload: encoded, options: options)
                == builder.notification(token: token, payload: Self.payload, options: options))
        }
    }

    @Test("a payload of the wrong shape is refused as a send of it is; a bad token still is, per send")
    func refusals() throws {
        let bad: JSONValue = ["alert": "no aps"]
        let builder = try fixedBuilder()
        var expected: APNsError?
        do throws(APNsError) { _ = try builder.alert(token: deviceToken, payload: bad) } catch { expected = error }
        var got: APNsError?
        do throws(APNsError) { _ = try EncodedPayload(bad) } catch { got = error }
        #expect(got != nil && got == expected, "\(String(describing: got)) vs \(String(describing: expected))")
        let encoded = try EncodedPayload(Self.payload)
        #expect(throws: APNsError.self) { try fixedBuilder().alert(token: "not-hex", payload: encoded) }
    }
}
