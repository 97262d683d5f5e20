import CMicroHTTPD
import Foundation
import Testing
import TestSupport

@Suite("libmicrohttpd is linked and serves on loopback")
struct MicroHTTPDLinkTests {
    @Test("a daemon on 127.0.0.1 port 0 answers curl with a fixed body through a C callback")
    func servesCurl() throws {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var options = [MHD_OptionItem(option: MHD_OPTION.END, value: 0, ptr_value: nil)]
        let flags = MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_AUTO.rawValue
        let daemon = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                apns_relay_mhd_start_daemon_full(
                    flags, 0, socketAddress, fixedBodyHandler, nil, nil, nil, &options)
            }
        }
        let running = try #require(daemon, "MHD_start_daemon failed")
        defer { MHD_stop_daemon(running) }

        let port = apns_relay_mhd_bound_port(running)
        #expect(port != 0)

        let (status, body) = try Self.curl("http://127.0.0.1:\(port)/ping?x=1")
        #expect(status == "200")
        #expect(body == "pong GET /ping\n")

        let (missingStatus, _) = try Self.curl("http://127.0.0.1:\(port)/elsewhere")
        #expect(missingStatus == "404")
    }

    /// Fetches `url` with curl; returns the status code and the body.
    static func curl(_ url: String) throws -> (status: String, body: String) {
        let curl = try ProcessRunner.capture(["curl", "-sS", "--max-time", "10", "-w", "\n%{http_code}", url])
        #expect(curl.status == 0, "curl exited with \(curl.status): \(String(decoding: curl.standardError, as: UTF8.self))")
        let text = String(decoding: curl.standardOutput, as: UTF8.self)
        guard let split = text.lastIndex(of: "\n") else { return ("", text) }
        return (String(text[text.index(after: split)...]), String(text[..<split]))
    }
}

/// 200 "pong <method> <path>" for /ping, 404 otherwise. A C-convention
/// function: it captures nothing.
private let fixedBodyHandler: MHD_AccessHandlerCallback = { _, connection, url, method, _, _, _, _ in
    guard let connection, let url, let method else { return MHD_Result.NO }
    let path = String(cString: url)
    let found = path == "/ping"
    let body = Array((found ? "pong \(String(cString: method)) \(path)\n" : "not found\n").utf8)
    let response = body.withUnsafeBytes { bytes in
        // MHD_RESPMEM_MUST_COPY: libmicrohttpd copies the bytes before this returns.
        MHD_create_response_from_buffer(bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress),
                                        MHD_ResponseMemoryMode(rawValue: 2)!)
    }
    guard let response else { return MHD_Result.NO }
    defer { MHD_destroy_response(response) }
    _ = MHD_add_response_header(response, "Content-Type", "text/plain")
    return MHD_queue_response(connection, UInt32(found ? MHD_HTTP_OK : MHD_HTTP_NOT_FOUND), response)
}
