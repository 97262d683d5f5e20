import RelayBasics
import Synchronization

/// The retry kill switch: while engaged, every send gets zero retries,
/// whatever its policy says.
///
/// Operators reach for it in an incident to tell "is this our retries or
/// APNs?" without a deploy. It is engaged by `APNS_RELAY_DISABLE_RETRY` set
/// to any non-empty value (the SDK's `MOBILE_SURFACES_PUSH_DISABLE_RETRY` is
/// honoured as an alias for teams moving over), or at runtime by the admin
/// API. The environment wins: a runtime release cannot undo it.
public final class KillSwitch: Sendable {
    /// Why the switch is engaged.
    public enum Source: String, Sendable, Hashable {
        case environment
        case runtime
    }

    /// The environment variables that engage the switch, in precedence order.
    public static let environmentVariables = ["APNS_RELAY_DISABLE_RETRY", "MOBILE_SURFACES_PUSH_DISABLE_RETRY"]

    /// The variable that engaged the switch at start-up, if any.
    public let environmentVariable: String?
    private let runtimeEngaged = Atomic<Bool>(false)

    /// Reads the process environment.
    public convenience init() {
        self.init(environment: ProcessEnvironment.value)
    }

    /// Reads variables through `environment` (tests pass a dictionary lookup).
    public init(environment: (String) -> String?) {
        environmentVariable = Self.environmentVariables.first { name in
            guard let value = environment(name) else { return false }
            return !value.isEmpty
        }
    }

    /// True when retries are off for every send.
    public var isEngaged: Bool { source != nil }

    /// What engaged the switch, or nil when retries are on.
    public var source: Source? {
        if environmentVariable != nil { return .environment }
        return runtimeEngaged.load(ordering: .acquiring) ? .runtime : nil
    }

    /// Engages or releases the runtime switch. Returns the resulting state:
    /// releasing has no effect while the environment variable is set.
    @discardableResult
    public func setRuntime(engaged: Bool) -> Bool {
        runtimeEngaged.store(engaged, ordering: .releasing)
        return isEngaged
    }
}
