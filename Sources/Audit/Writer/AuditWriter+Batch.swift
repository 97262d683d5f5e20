import Foundation
public import Relay
import RelayBasics

extension AuditWriter {
    /// Journals the intents of several sends about to start together (a
    /// batch's) and returns once all of them are durable: with `.interval`
    /// one `write(2)` under one lock for all of them, on the calling thread,
    /// without suspending; with `.always` one hand-over to the journal
    /// thread, whose next group writes and `fdatasync`s them together.
    /// False when they could not be made durable (see ``sendStarting(_:startedAt:)``).
    public func sendsStarting(_ sends: [SendIntent]) async -> Bool {
        guard configuration.journalSync == .interval else {
            if syncStalled(now: MonotonicClock.now()) { return false }
            return await handOver(sends.lazy.map { .intent($0.send, startedAt: $0.startedAt) })
        }
        return journal.appendTogether(sends.count, intents: true) { index, bytes in
            journal.encodeIntent(sends[index].send, startedAt: sends[index].startedAt, into: &bytes)
        }
    }

    /// Journals the completions of several sends that ran together (a
    /// batch's chunk) and returns once all of them are durable, as
    /// ``sendsStarting(_:)`` journals intents: one `write(2)` under one lock
    /// (`.interval`) or one group of the journal thread (`.always`). Each is
    /// still its own record, its row queued for the writer, its intent
    /// answered in the ledger, exactly as ``sendFinishedDurably(_:)`` does one.
    public func sendsFinishedDurably(_ events: [SendEvent]) async {
        guard configuration.journalSync == .interval else {
            _ = await handOver(events.lazy.map { .completion($0) })
            return
        }
        journal.appendTogether(events.count, intents: false) { index, bytes in journal.encodeCompletion(events[index], into: &bytes) }
    }
}
