import Prometheus

/// What the exposition and the docs show of one declared metric, whatever its
/// type: its name, HELP text, TYPE and label names.
public struct MetricDeclaration: Sendable, Hashable {
    /// The metric's TYPE line.
    public enum Kind: String, Sendable {
        case counter, gauge, histogram
    }

    /// The Prometheus name, unique across the relay.
    public let name: String
    /// Counter, gauge or histogram, as the TYPE line says.
    public let kind: Kind
    /// The HELP line (`promtool check metrics` requires one).
    public let help: String
    /// Label names in exposition order; nil when each recording chooses them
    /// (only `apns_relay_build_info`, whose labels are the libraries' names).
    public let labelNames: [String]?
    /// Bucket upper bounds, for histograms only.
    public let buckets: [Double]

    init<Labels: MetricLabels>(name: String, kind: Kind, help: String, labels: Labels.Type, buckets: [Double] = []) {
        self.name = name
        self.kind = kind
        self.help = help
        self.labelNames = Labels.names
        self.buckets = buckets
    }

    /// The name and help as swift-prometheus takes them. An empty unit keeps
    /// the name exactly as declared (the descriptor joins non-empty parts only).
    var descriptor: MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
    }
}

/// A counter: its declaration, and the label set every recording must carry.
struct CounterDefinition<Labels: MetricLabels>: Sendable {
    let declaration: MetricDeclaration

    init(_ name: String, help: String, labels: Labels.Type) {
        declaration = MetricDeclaration(name: name, kind: .counter, help: help, labels: labels)
    }
}

/// A gauge: its declaration, and the label set every recording must carry.
struct GaugeDefinition<Labels: MetricLabels>: Sendable {
    let declaration: MetricDeclaration

    init(_ name: String, help: String, labels: Labels.Type) {
        declaration = MetricDeclaration(name: name, kind: .gauge, help: help, labels: labels)
    }
}

/// A histogram of seconds (or any value): its declaration with buckets, and
/// the label set every recording must carry.
struct HistogramDefinition<Labels: MetricLabels>: Sendable {
    let declaration: MetricDeclaration

    init(_ name: String, help: String, labels: Labels.Type, buckets: [Double]) {
        declaration = MetricDeclaration(name: name, kind: .histogram, help: help, labels: labels, buckets: buckets)
    }
}

extension CounterDefinition where Labels == NoLabels {
    init(_ name: String, help: String) { self.init(name, help: help, labels: NoLabels.self) }
}

extension GaugeDefinition where Labels == NoLabels {
    init(_ name: String, help: String) { self.init(name, help: help, labels: NoLabels.self) }
}
