extension ServerConfiguration {
    /// Every setting of the configuration file, in the file's order: the
    /// one place a setting is declared. Parsing reads a block's settings in
    /// this order and then refuses the block's unknown keys; check-config
    /// prints them in this order; docs/operations.md's settings table is
    /// generated from it (`scripts/generate-settings-table`).
    static let settings: [Setting] = listenerSettings + apnsSettings + entrySettings + auditSettings + processSettings

    /// Checks across the settings of one block, run once that block is read.
    static let blockChecks: [BlockCheck] = [apnsIngressCheck, tracingCheck]

    /// Blocks check-config prints on one line: `sampling: {ratio: 1.0, parent_based: true}`.
    static let inlineBlocks: Set<String> = ["tracing.sampling"]
}
