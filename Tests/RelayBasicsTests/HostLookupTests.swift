import Glibc
import RelayBasics
import Testing

@Suite("HostLookup: getaddrinfo with a deadline")
struct HostLookupTests {
    func addresses(_ outcome: HostLookup.Outcome?) -> [HostLookup.Address] {
        guard case .addresses(let addresses)? = outcome else { return [] }
        return addresses
    }

    func isReady(_ lookup: HostLookup) -> Bool {
        var descriptor = pollfd(fd: lookup.readyDescriptor, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) == 1
    }

    @Test("a numeric host is done before start returns, with no resolver asked")
    func numeric() throws {
        let four = HostLookup.start(host: "127.0.0.1", port: 443)
        #expect(addresses(four.outcome).map(\.numericHost) == ["127.0.0.1"])
        #expect(addresses(four.outcome).map(\.family) == [AF_INET])
        #expect(isReady(four))
        let six = HostLookup.start(host: "::1", port: 443)
        #expect(addresses(six.outcome).map(\.numericHost) == ["::1"])
        #expect(addresses(six.outcome).first?.bytes.count == MemoryLayout<sockaddr_in6>.size)
    }

    @Test("a name is looked up on a thread of its own; its waiter and its descriptor learn of the end")
    func name() throws {
        // In /etc/hosts: the files source answers, no DNS query.
        let lookup = HostLookup.start(host: "localhost", port: 5432)
        let outcome = lookup.wait(until: MonotonicClock.now() + 60_000_000_000)
        let found = Set(addresses(outcome).map(\.numericHost))
        #expect(!found.isDisjoint(with: ["127.0.0.1", "::1"]), "localhost gave \(found)")
        #expect(isReady(lookup))
        // The port is in every address, in network order.
        for address in addresses(outcome) {
            #expect(address.bytes[2] == 0x15 && address.bytes[3] == 0x38)
        }
    }

    @Test("a lookup that does not end leaves its waiter at the deadline, and wakes it when it ends")
    func deadline() async throws {
        let lookup = HostLookup.pendingForTesting(host: "stalled.test", port: 443)
        #expect(lookup.wait(until: MonotonicClock.now() + 50_000_000) == nil)
        #expect(lookup.outcome == nil)
        #expect(!isReady(lookup))
        let waiter = Task.detached { lookup.wait(until: MonotonicClock.now() + 600_000_000_000) }
        lookup.finishForTesting(.failed("no answer"))
        guard case .failed(let message)? = await waiter.value else { Issue.record("the waiter was not woken with the outcome"); return }
        #expect(message == "no answer")
        #expect(isReady(lookup))
    }
}
