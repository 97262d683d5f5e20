internal import CMicroHTTPD
internal import Zlib

extension HTTPServer {
    /// The running libmicrohttpd's version, for `apns_relay_build_info`.
    public static var libmicrohttpdVersion: String {
        guard let text = MHD_get_version() else { return "unknown" }
        return String(cString: text)
    }

    /// The running zlib's version.
    public static var zlibVersion: String { Zlib.version }
}
