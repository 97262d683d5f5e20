extension ServerConnection: PollLoopMember {
    /// A second at most: the request time limit is checked each turn.
    static var longestPollMilliseconds: Int32 { Int32(longestSleep / 1_000_000) }

    func turnBeforePoll(now: UInt64) -> Bool {
        if turn(now: now) { return true }
        finish()
        return false
    }

    func beforeSleep() {}

    func turnAfterPoll(_ readiness: Poll.Readiness) -> Bool {
        if afterPoll(readiness) { return true }
        finish()
        return false
    }
}
