import Logging
import Relay

/// The HTTP/2 pools to APNs. They connect on the first send, so starting
/// opens nothing; the drain closes them.
struct APNsPoolPart: RelayPart {
    let name = "APNs pool"
    let transport: HTTP2Transport
    let logger: Logger

    /// Closes every pool; in-flight streams get 5 s (after the ingress
    /// listener's cut-off there are none).
    func stop() async {
        await transport.close(drainTimeout: 5)
    }
}
