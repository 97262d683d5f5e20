extension Duration {
    /// The duration in seconds as a `Double` (attoseconds kept as the
    /// fraction): what metrics, spans, audit rows and rate limits take.
    public var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
