import Audit
import Foundation
@testable import RelayServer
import Testing

/// What the audit says about readiness (`/readyz` on both listeners; draining
/// comes first and is the ingress' own). Times are injected: no verdict reads the clock.
@Suite("Relay server readiness")
struct ReadinessTests {
    static let now = Date(timeIntervalSince1970: 1_795_341_600)

    static func reason(_ statistics: AuditStatistics, spoolWritable: Bool = true) -> String? {
        RelayServer.auditNotReadyReason(statistics, spoolDirectory: "/var/spool/relay", spoolWritable: spoolWritable, behindLimit: 60, now: now)
    }

    static func statistics(connected: Bool = true, behindFor: Double? = nil, connectedAgo: Double? = nil) -> AuditStatistics {
        var statistics = AuditStatistics()
        statistics.databaseConfigured = true
        statistics.connected = connected
        statistics.behindSince = behindFor.map { now.addingTimeInterval(-$0) }
        statistics.lastConnectedAt = connectedAgo.map { now.addingTimeInterval(-$0) }
        return statistics
    }

    @Test("ready when rows land, and while Postgres is down but the spool takes them")
    func ready() {
        #expect(Self.reason(Self.statistics()) == nil)
        #expect(Self.reason(Self.statistics(connected: false, behindFor: 3600, connectedAgo: 7200)) == nil, "an outage every relay shares keeps it in rotation")
        #expect(Self.reason(Self.statistics(behindFor: 30, connectedAgo: 1)) == nil, "behind, but not past the limit")
    }

    @Test("not ready when neither Postgres nor the spool can take rows, naming the spool")
    func nowhereToWrite() {
        #expect(Self.reason(Self.statistics(connected: false), spoolWritable: false)
            == "the audit log can be written neither to Postgres nor to the spool (/var/spool/relay)")
        #expect(Self.reason(Self.statistics(connected: true), spoolWritable: false) == nil)
    }

    @Test("behind since an outage's start, but Postgres answered only lately (every relay replaying its spool at once): ready until the limit passes since it answered")
    func replayingAfterOutage() {
        var replaying = Self.statistics(behindFor: 600, connectedAgo: 5)
        replaying.reachableSince = Self.now.addingTimeInterval(-5)
        #expect(Self.reason(replaying) == nil)
        replaying.reachableSince = Self.now.addingTimeInterval(-90)
        #expect(Self.reason(replaying)
            == "the audit has not reached Postgres for 600 s although Postgres answers (rows wait in the spool; see the writer's log)")
    }

    @Test("not ready when Postgres answers and rows still do not land past the limit")
    func stuckWhileReachable() {
        // Behind with the connection open: Postgres answered from the start.
        var stuck = Self.statistics(behindFor: 90, connectedAgo: 5)
        stuck.reachableSince = stuck.behindSince
        #expect(Self.reason(stuck)
            == "the audit has not reached Postgres for 90 s although Postgres answers (rows wait in the spool; see the writer's log)")
        // A statement Postgres did not answer in time (a locked table, a
        // frozen server) clears when it answered: a fault every relay shares.
        stuck.reachableSince = nil
        #expect(Self.reason(stuck) == nil)
    }

    @Test("not ready while a journal record has waited over 5 s for its fdatasync (a stalled spool disk), naming it; a slow sync under the limit is ready")
    func journalSyncStalled() {
        let now: UInt64 = 1_000_000_000_000
        var slow = Self.statistics()
        slow.journalSyncingSince = now - 4_000_000_000
        #expect(RelayServer.auditNotReadyReason(
            slow, spoolDirectory: "/var/spool/relay", spoolWritable: true, behindLimit: 60, now: Self.now, monotonicNow: now) == nil)
        var stalled = slow
        stalled.journalUnsyncedSince = now - 9_000_000_000
        #expect(RelayServer.auditNotReadyReason(
            stalled, spoolDirectory: "/var/spool/relay", spoolWritable: true, behindLimit: 60, now: Self.now, monotonicNow: now)
            == "the audit journal has not been synced to disk for 9 s (/var/spool/relay): the disk's fdatasync does not return")
        // A failing journal (a full disk) has its own reason and signal: no second one for the same disk.
        var failing = stalled
        failing.journalFailing = true
        #expect(failing.journalUnsyncedSeconds(now: now) == 0)
        #expect(RelayServer.auditNotReadyReason(
            failing, spoolDirectory: "/var/spool/relay", spoolWritable: true, behindLimit: 60, now: Self.now, monotonicNow: now)
            == "the audit journal cannot be written (full, read-only or failing disk) (/var/spool/relay); sends are refused until it can")
    }
}
