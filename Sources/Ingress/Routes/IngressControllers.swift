import HTTPServer

/// The ingress' controllers, each with the dependencies it uses: what the
/// route table binds its rows to (``Ingress/routes``). Built once, when the
/// ingress is.
struct IngressControllers: Sendable {
    let send: SendController
    let batch: BatchController
    let channels: ChannelController
    let deadTokens: DeadTokenController
    let admin: AdminController
    let apnsCompatible: APNsCompatibleController
    let probes: HealthProbes
}
