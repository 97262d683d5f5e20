import Foundation
import Testing

/// A node of `EXPLAIN (FORMAT JSON)`.
struct PlanNode: CustomStringConvertible {
    var type: String
    var relation: String?
    var index: String?
    /// Under ANALYZE: the rows this node read from its relation over all its
    /// loops (those it passed on and those its filter removed).
    var rowsRead: Double?
    var children: [PlanNode]

    init(explainJSON text: String) throws {
        let top = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]])
        self.init(try #require(top.first?["Plan"] as? [String: Any]))
    }

    init(_ node: [String: Any]) {
        type = node["Node Type"] as? String ?? "?"
        relation = node["Relation Name"] as? String
        index = node["Index Name"] as? String
        if let rows = node["Actual Rows"] as? Double ?? (node["Actual Rows"] as? Int).map(Double.init) {
            let loops = node["Actual Loops"] as? Double ?? (node["Actual Loops"] as? Int).map(Double.init) ?? 1
            let removed = node["Rows Removed by Filter"] as? Double ?? (node["Rows Removed by Filter"] as? Int).map(Double.init) ?? 0
            rowsRead = (rows + removed) * loops
        }
        children = ((node["Plans"] as? [[String: Any]]) ?? []).map(PlanNode.init)
    }

    static func executionTime(explainJSON text: String) throws -> Double? {
        let top = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]])
        return top.first?["Execution Time"] as? Double
    }

    /// The shared buffers (8 KiB pages) an `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)`
    /// run touched, found in the cache or read: the work a query does, which,
    /// unlike its time, does not depend on what else the machine is doing.
    static func sharedBlocks(explainJSON text: String) throws -> Int? {
        let top = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]])
        guard let plan = top.first?["Plan"] as? [String: Any],
              let hit = plan["Shared Hit Blocks"] as? Int, let read = plan["Shared Read Blocks"] as? Int else { return nil }
        return hit + read
    }

    /// This node and every node below it.
    var all: [PlanNode] { [self] + children.flatMap(\.all) }

    var description: String { lines(depth: 0).joined(separator: "\n") }

    func lines(depth: Int) -> [String] {
        let detail = [relation.map { "on \($0)" }, index.map { "using \($0)" }].compactMap { $0 }.joined(separator: " ")
        return [String(repeating: "  ", count: depth) + type + (detail.isEmpty ? "" : " " + detail)] + children.flatMap { $0.lines(depth: depth + 1) }
    }
}
