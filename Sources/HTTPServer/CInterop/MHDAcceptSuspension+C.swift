internal import CMicroHTTPD

/// Whether a daemon stopped accepting for want of a descriptor, and the way
/// to make it accept again once one is free.
///
/// libmicrohttpd 0.9.75, at the open-file limit with connections open, stops
/// polling its listening socket until one of its connections closes (its
/// `at_limit`). Clients kept alive and busy never close, so a new client
/// would wait in the backlog for as long as they stay, long after the
/// descriptors are back. libmicrohttpd says when it stops (through the
/// logger the shims set, which sets this flag); the next answer given once
/// a descriptor is free closes its connection (``closesConnectionNow()``),
/// and that close makes libmicrohttpd accept again. The client whose
/// answer it was reconnects, as HTTP/1.1 clients do after `Connection: close`.
/// With no answer coming (every connection idle, or waiting for its first
/// request), ``RequestDeadlines`` closes one on its next check instead.
final class MHDAcceptSuspension: @unchecked Sendable {
    /// Written by libmicrohttpd's thread (the logger) and read and cleared by
    /// whichever thread answers, with C11 atomics only (`shims.c`).
    let flag: UnsafeMutablePointer<Int32>

    init() {
        flag = .allocate(capacity: 1)
        flag.initialize(to: 0)
    }

    deinit { flag.deallocate() }

    /// True once for each suspension, when a descriptor is free: the answer
    /// being queued should close its connection. An atomic load when the
    /// daemon is accepting.
    func closesConnectionNow() -> Bool { apns_relay_mhd_take_accept_suspended(flag) != 0 }

    /// Flags the suspension again: the taker found no connection to close.
    func restore() { apns_relay_mhd_mark_accept_suspended(flag) }
}
