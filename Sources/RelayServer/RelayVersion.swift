import Audit
import HTTP2
import HTTPServer

/// The relay's own version.
public enum RelayVersion {
    public static let current = "0.1.0"
}

extension RelayServer {
    /// Labels of `apns_relay_build_info`: the relay's version and each C
    /// library's version as loaded at run time.
    public static var buildInfo: [(String, String)] {
        [
            ("version", RelayVersion.current), ("nghttp2", HTTP2LibraryVersions.nghttp2), ("openssl", HTTP2LibraryVersions.openssl),
            ("libpq", AuditLibraryVersions.libpq), ("libmicrohttpd", HTTPServer.libmicrohttpdVersion), ("zlib", HTTPServer.zlibVersion),
        ]
    }
}
