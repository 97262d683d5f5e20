internal import CNGHTTP2
internal import COpenSSL

/// Versions of the C libraries this module runs on, read from the libraries
/// themselves (not the headers it was built against), for `apns_relay_build_info`.
public enum HTTP2LibraryVersions {
    /// libnghttp2, e.g. `1.52.0`.
    public static var nghttp2: String {
        guard let info = nghttp2_version(0), let text = info.pointee.version_str else { return "unknown" }
        return String(cString: text)
    }

    /// OpenSSL, e.g. `3.0.17`.
    public static var openssl: String {
        guard let text = OpenSSL_version(Int32(OPENSSL_VERSION_STRING)) else { return "unknown" }
        return String(cString: text)
    }
}
