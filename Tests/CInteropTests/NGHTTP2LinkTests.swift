import CNGHTTP2
import Testing

@Suite("libnghttp2 is linked and usable")
struct NGHTTP2LinkTests {
    @Test("a client session emits the HTTP/2 connection preface and our SETTINGS")
    func clientPreface() throws {
        let info = try #require(nghttp2_version(0))
        #expect(info.pointee.version_num >= 0x012B00, "libnghttp2 1.43 or newer")

        var callbacks: OpaquePointer?
        #expect(nghttp2_session_callbacks_new(&callbacks) == 0)
        defer { nghttp2_session_callbacks_del(callbacks) }
        var session: OpaquePointer?
        #expect(nghttp2_session_client_new(&session, callbacks, nil) == 0)
        defer { nghttp2_session_del(session) }

        var settings = [nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0)]
        #expect(nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, 1) == 0)
        var bytes: [UInt8] = []
        while true {
            var data: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(session, &data)
            guard count > 0, let data else { break }
            bytes.append(contentsOf: UnsafeBufferPointer(start: data, count: count))
        }
        let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
        #expect(Array(bytes.prefix(preface.count)) == preface)
        // A SETTINGS frame follows: length 6 (one entry), type 0x4.
        #expect(Array(bytes[preface.count..<(preface.count + 4)]) == [0, 0, 6, 4])
    }
}
