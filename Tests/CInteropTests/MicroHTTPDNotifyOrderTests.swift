import CMicroHTTPD
import Foundation
import Synchronization
import Testing
import TestSupport

/// The request deadlines (HTTPServer's RequestDeadlines) shut down sockets
/// from another thread and rely on libmicrohttpd calling the
/// connection-closed notification before it closes the descriptor: the
/// entry is dropped under the same lock first, so a reused descriptor is
/// never touched. This pins that order for the libmicrohttpd we link.
@Suite("libmicrohttpd notifies a closed connection before closing its socket")
struct MicroHTTPDNotifyOrderTests {
    final class Record: Sendable {
        /// Per closed connection: was its descriptor still open when notified?
        let openAtClose = Mutex<[Bool]>([])
        let started = Atomic<Int>(0)
    }

    @Test("20 connections: each socket is still open in MHD_CONNECTION_NOTIFY_CLOSED")
    func closedBeforeClose() async throws {
        let record = Record()
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var options = [MHD_OptionItem(option: MHD_OPTION.END, value: 0, ptr_value: nil)]
        let flags = MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_EPOLL.rawValue
        let context = Unmanaged.passUnretained(record).toOpaque()
        let daemon = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                apns_relay_mhd_start_daemon_hooks(
                    flags, 0, socketAddress, okHandler, nil, nil, notify, nil, context, nil, &options)
            }
        }
        let running = try #require(daemon)
        let port = apns_relay_mhd_bound_port(running)
        for _ in 0..<20 {
            let curl = try ChildProcess(
                ["curl", "-sS", "--max-time", "10", "-o", "/dev/null", "-H", "Connection: close", "http://127.0.0.1:\(port)/"],
                standardOutput: .inherit, standardError: .inherit)
            _ = await curl.exited()
        }
        // Connection: close: libmicrohttpd closes each after answering; the
        // stop closes any it has not yet cleaned up, notifying as well.
        MHD_stop_daemon(running)
        let seen = record.openAtClose.withLock { $0 }
        #expect(record.started.load(ordering: .relaxed) == 20)
        #expect(seen.count == 20)
        #expect(seen.allSatisfy { $0 }, "a socket was already closed when its closed notification ran: \(seen)")
    }
}

private let notify: MHD_NotifyConnectionCallback = { context, connection, _, event in
    guard let context, let connection else { return }
    let record = Unmanaged<MicroHTTPDNotifyOrderTests.Record>.fromOpaque(context).takeUnretainedValue()
    if event.rawValue == 0 {
        record.started.add(1, ordering: .relaxed)
        return
    }
    let fd = apns_relay_mhd_connection_fd(connection)
    let open = fd >= 0 && fcntl(fd, F_GETFD) != -1
    record.openAtClose.withLock { $0.append(open) }
}

private let okHandler: MHD_AccessHandlerCallback = { _, connection, _, _, _, _, _, _ in
    guard let connection else { return MHD_Result.NO }
    let response = MHD_create_response_from_buffer(0, nil, MHD_ResponseMemoryMode(rawValue: 0)!)
    defer { MHD_destroy_response(response) }
    return MHD_queue_response(connection, 200, response)
}
