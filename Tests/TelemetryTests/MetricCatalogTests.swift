import APNs
import Foundation
import HTTPServer
import Logging
import MockAPNs
import Relay
import Telemetry
import TestSupport
import Testing

/// One exposition family as a scrape shows it.
struct ScrapedFamily: Equatable {
    var help: String?
    var type: String?
    /// The label names of each sample line, in order (`le` and the
    /// `_bucket`/`_sum`/`_count` suffixes of histograms left out).
    var labelSets: Set<[String]> = []
}

/// Parses an exposition text into its families by name.
func scrapedFamilies(_ text: String) -> [String: ScrapedFamily] {
    var families: [String: ScrapedFamily] = [:]
    let labelName = /([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"/
    for line in text.split(separator: "\n") {
        if line.hasPrefix("# HELP ") || line.hasPrefix("# TYPE ") {
            let rest = line.dropFirst(7)
            let name = String(rest.prefix { $0 != " " })
            let value = String(rest.dropFirst(name.count + 1))
            if line.hasPrefix("# HELP ") { families[name, default: .init()].help = value } else { families[name, default: .init()].type = value }
            continue
        }
        let series = line.prefix { $0 != " " }
        var name = String(series.prefix { $0 != "{" })
        var labels = series.contains("{") ? series.matches(of: labelName).map { String($0.output.1) } : []
        for suffix in ["_bucket", "_sum", "_count"] where name.hasSuffix(suffix) {
            let family = String(name.dropLast(suffix.count))
            if families[family]?.type == "histogram" {
                name = family
                labels.removeAll { $0 == "le" }
            }
        }
        families[name, default: .init()].labelSets.insert(labels)
    }
    return families
}

@Suite("Metric catalog")
struct MetricCatalogTests {
    static let root = AlertRulesTests.root

    @Test("each metric name is declared once, with valid label names and a HELP text")
    func declaredOnce() {
        let names = MetricCatalog.declarations.map(\.name)
        #expect(Set(names).count == names.count, "a name declared twice: \(names)")
        #expect(names.count == 39)
        for declaration in MetricCatalog.declarations {
            #expect(declaration.name.wholeMatch(of: /[a-zA-Z_:][a-zA-Z0-9_:]*/) != nil, "\(declaration.name)")
            #expect(!declaration.help.isEmpty, "\(declaration.name) has no HELP")
            let labels = declaration.labelNames ?? []
            #expect(Set(labels).count == labels.count, "\(declaration.name) repeats a label")
            for label in labels {
                #expect(label.wholeMatch(of: /[a-zA-Z_][a-zA-Z0-9_]*/) != nil && !label.hasPrefix("__") && label != "le", "\(declaration.name): \(label)")
            }
            #expect(declaration.kind == .histogram ? !declaration.buckets.isEmpty : declaration.buckets.isEmpty, "\(declaration.name)")
            #expect(declaration.name.hasSuffix("_total") == (declaration.kind == .counter), "\(declaration.name): counters end in _total, nothing else does")
        }
    }

    @Test("metrics are defined only in MetricCatalog.swift and made on the registry only in RelayMetrics.swift")
    func oneDefinitionPerName() throws {
        let sources = Self.root.appendingPathComponent("Sources")
        let files = try #require(FileManager.default.subpaths(atPath: sources.path)).filter { $0.hasSuffix(".swift") }
        #expect(files.count > 50)
        var definitionsInCatalog = 0
        for file in files {
            let text = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8)
            let definitions = text.matches(of: /(Counter|Gauge|Histogram)Definition\(\s*"/).count
            if file == "Telemetry/Metrics/MetricCatalog.swift" {
                definitionsInCatalog = definitions
            } else {
                #expect(definitions == 0, "\(file) defines a metric outside MetricCatalog.swift")
            }
            if file != "Telemetry/Metrics/RelayMetrics.swift" {
                #expect(text.matches(of: /\.make(Counter|Gauge|ValueHistogram|DurationHistogram|Summary)\(/).isEmpty,
                        "\(file) makes a metric on the registry outside RelayMetrics.swift")
            }
        }
        // Every definition in the catalog is in `declarations`, so docs and scrape checks see it.
        #expect(definitionsInCatalog == MetricCatalog.declarations.count)
    }

    @Test("docs/architecture.md lists every declared metric once with its labels, and no other")
    func documented() throws {
        let architecture = try String(contentsOf: Self.root.appendingPathComponent("docs/architecture.md"), encoding: .utf8)
        let start = try #require(architecture.range(of: "\n## Metrics\n"))
        let section = architecture[start.upperBound...]
        let end = section.range(of: "\n## ")?.lowerBound ?? section.endIndex
        let listed = section[..<end].matches(of: /`((?:apns_relay|process)_[a-z0-9_]+)(\{[^}`]*\})?`/).map {
            (name: String($0.output.1), labels: $0.output.2.map(String.init) ?? "")
        }
        #expect(Set(listed.map(\.name)).count == listed.count, "a metric listed twice: \(listed.map(\.name))")
        let declared = Dictionary(uniqueKeysWithValues: MetricCatalog.declarations.map { ($0.name, $0) })
        for (name, labels) in listed {
            let declaration = try #require(declared[name], "docs/architecture.md lists \(name), which is not declared")
            let expected = declaration.labelNames.map { $0.isEmpty ? "" : "{" + $0.joined(separator: ",") + "}" } ?? "{...}"
            #expect(labels == expected, "\(name): docs say \(labels), declared \(expected)")
        }
        let missing = Set(declared.keys).subtracting(listed.map(\.name))
        #expect(missing.isEmpty, "declared but not in docs/architecture.md's metric list: \(missing.sorted())")
    }

    @Test("after every recording path ran, the scrape holds exactly the declared families with their HELP, TYPE and label names")
    func scrapeMatchesDeclarations() async throws {
        // A send rejected with a trap, one retried, one plain: every send and attempt series.
        let fixture = try MetricsFixture(keyID: "CATALOGK01", teamID: "CATALOGT01", rules: [
            MockRule(.tokenPrefix("dead"), always: .unregistered(at: 1)),
            MockRule(.tokenPrefix("f1a7"), [.reject(reason: "ServiceUnavailable"), .succeed]),
        ])
        defer { fixture.keys.remove() }
        let metrics = fixture.metrics
        for prefix in ["dead", "f1a7", "0000"] {
            await fixture.sendAlert(token: prefix + String(repeating: "0", count: 60))
        }
        metrics.connectionEvent("opened")
        metrics.ingressRequest(route: "/v1/send", status: 200, seconds: 0.01)
        metrics.idempotentReplay(app: "catalog-app")
        metrics.spansDropped(reason: "export_failed", count: 1)
        var sources = MetricSources(
            clockSkewSeconds: { 1 }, retryDisabled: { false }, inflightStreams: { 0 },
            audit: { AuditSnapshot(queueDepth: 0, spoolBytes: 0, connected: true, written: 1, spooled: 0, replayed: 0, dropped: 0) },
            connections: { [(origin: "https://127.0.0.1:1", state: "ready", count: 1)] })
        sources.ingressInFlight = { 0 }
        sources.ingressSendsAdmitted = { 0 }
        sources.ingressBatchSendsRunning = { 0 }
        sources.ingressNotSent = { ["Draining": 1] }
        sources.ingressRequestsTimedOut = { 1 }
        sources.apnsIngressConnectionsRefused = { ["threads": 1] }
        var router = Router()
        MetricsEndpoint(metrics: metrics, sources: sources, buildInfo: [("version", "test"), ("zlib", "1")]).install(on: &router)
        metrics.refresh(sources)

        let families = scrapedFamilies(metrics.registry.emitToString())
        #expect(Set(families.keys) == Set(MetricCatalog.declarations.map(\.name)), "scraped families differ from the declared ones")
        for declaration in MetricCatalog.declarations {
            let family = try #require(families[declaration.name], "\(declaration.name) not scraped")
            #expect(family.help == declaration.help, "\(declaration.name) HELP")
            #expect(family.type == declaration.kind.rawValue, "\(declaration.name) TYPE")
            let expected = declaration.labelNames ?? ["version", "zlib"]
            #expect(family.labelSets == [expected], "\(declaration.name) labels: \(family.labelSets), declared \(expected)")
        }
    }
}
