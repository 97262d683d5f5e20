import Foundation
import HTTP2
import Testing
import TestSupport

/// The server's close after a GOAWAY is a lingering one: close_notify and
/// FIN, then the peer's late bytes are read and dropped until it closes.
/// Closed at once with the peer's bytes unread, the socket would answer
/// them with an RST, and a client's stack that takes the RST first loses
/// the GOAWAY that said which streams were never processed.
@Suite("HTTP/2 server: a lingering close after GOAWAY")
struct LingeringCloseTests {
    /// A raw HTTP/2 peer (Python's ssl, frames by hand) that asks for an
    /// abrupt GOAWAY, keeps writing PINGs after it arrives, then reads to
    /// the end: exit 0 for a clean close (close_notify, then end of
    /// stream), 2 for a reset or a TLS stream cut without close_notify.
    static let peer = #"""
        import socket, ssl, struct, sys
        port, ca = int(sys.argv[1]), sys.argv[2]
        ctx = ssl.create_default_context(cafile=ca)
        ctx.check_hostname = False
        ctx.set_alpn_protocols(["h2"])
        s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")
        assert s.selected_alpn_protocol() == "h2", s.selected_alpn_protocol()
        def frame(kind, flags, stream, payload=b""):
            return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload
        path = b"/fault/goaway-abrupt"
        block = b"\x82\x87" + b"\x44" + bytes([len(path)]) + path + b"\x41\x09localhost"
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0) + frame(1, 5, 1, block))
        buffer, goaway = b"", False
        while not goaway:
            data = s.recv(65536)
            if not data: print("closed before GOAWAY"); sys.exit(1)
            buffer += data
            while len(buffer) >= 9:
                length = int.from_bytes(buffer[:3], "big")
                if len(buffer) < 9 + length: break
                goaway = goaway or buffer[3] == 7
                buffer = buffer[9 + length:]
        try:
            for _ in range(20): s.sendall(frame(6, 0, 0, b"12345678"))
            while s.recv(65536): pass
            print("clean close after GOAWAY")
        except (ConnectionResetError, ssl.SSLError, BrokenPipeError) as error:
            print(f"cut after GOAWAY: {type(error).__name__}: {error}")
            sys.exit(2)
        """#

    @Test("a peer that still writes after an abrupt GOAWAY gets a clean close, not a reset or a cut")
    func abruptGoAwayClosesCleanly() async throws {
        let local = try LocalServer(handler: echoHandler)
        defer { local.stop() }
        let (status, output) = try await ProcessRunner.runOffPool(
            ["python3", "-c", Self.peer, String(local.server.port), local.certificate.certificate])
        #expect(status == 0, "\(output)")
        #expect(output.contains("clean close after GOAWAY"), "\(output)")
    }
}
