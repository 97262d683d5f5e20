import RelayBasics
import Testing

@Suite("HTTPHeader")
struct HTTPHeaderTests {
    @Test("names are lowercased once, at construction; values are kept as given")
    func lowercaseNames() {
        let header = HTTPHeader("APNs-Push-Type", "Alert")
        #expect(header.name == "apns-push-type")
        #expect(header.value == "Alert")
        #expect(header.description == "apns-push-type: Alert")
        #expect(HTTPHeader("X-A", "1") == HTTPHeader("x-a", "1"))
    }

    @Test("lookup by name in any case finds the first of repeated headers")
    func lookup() {
        let headers = [HTTPHeader("apns-id", "first"), HTTPHeader("Retry-After", "7"), HTTPHeader("apns-id", "second")]
        #expect(headers.value(of: "apns-id") == "first")
        #expect(headers.value(of: "RETRY-AFTER") == "7")
        #expect(headers.value(of: "date") == nil)
        #expect([HTTPHeader]().value(of: "apns-id") == nil)
    }
}
