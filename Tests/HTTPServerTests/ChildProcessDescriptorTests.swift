import Foundation
import Synchronization
import Testing
import TestSupport

/// A child started by a test inherits only its standard descriptors: not the
/// test process's listening sockets, nor pipes meant for other children.
@Suite("Test children inherit no descriptors")
struct ChildProcessDescriptorTests {
    /// A loopback listening socket and a pipe, both without FD_CLOEXEC (as a
    /// C library or a careless test would open them).
    struct Held {
        let descriptors: [Int32]

        init() throws {
            let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            try #require(listener >= 0 && bound == 0 && listen(listener, 4) == 0)
            var ends: [Int32] = [-1, -1]
            try #require(pipe(&ends) == 0)
            descriptors = [listener] + ends
            for fd in descriptors { try #require(fcntl(fd, F_GETFD) & FD_CLOEXEC == 0) }
        }

        func close() { for fd in descriptors { _ = Glibc.close(fd) } }
    }

    /// The descriptors the shell in `output` listed (one number a line).
    static func listed(_ output: String) -> Set<Int32> {
        Set(output.split(whereSeparator: \.isNewline).compactMap { Int32($0.trimmingCharacters(in: .whitespaces)) })
    }

    // `; :` keeps the shell from exec-ing ls, so $$ is the spawned process itself.
    static let listing = ["sh", "-c", "ls /proc/$$/fd; :"]

    @Test("a one-shot command (ProcessRunner) sees only 0, 1 and 2")
    func oneShot() async throws {
        let held = try Held()
        defer { held.close() }
        let (status, output) = try await ProcessRunner.runOffPool(Self.listing)
        #expect(status == 0, "\(output)")
        #expect(Self.listed(output) == [0, 1, 2], "inherited: \(output); the test holds \(held.descriptors)")
        let outcome = try await ProcessRunner.captureOffPool(Self.listing)
        #expect(Self.listed(String(decoding: outcome.standardOutput, as: UTF8.self)) == [0, 1, 2])
    }

    @Test("a long-running child (ChildProcess) sees only 0, 1 and 2, and is reaped after a kill")
    func longRunning() async throws {
        let held = try Held()
        defer { held.close() }
        let child = try ChildProcess(["sh", "-c", "ls /proc/$$/fd; echo end; exec sleep 600"], input: true, standardOutput: .pipe)
        let lines = Mutex<[String]>([])
        ChildProcess.collectLines(of: child.standardOutput!) { line in lines.withLock { $0.append(line) } }
        let listed = await eventually(30, every: .milliseconds(10)) { lines.withLock { $0.contains("end") } }
        #expect(listed, "the shell listed its descriptors")
        #expect(child.isRunning)
        child.kill()
        #expect(await child.exited() == SIGKILL)
        #expect(!child.isRunning)
        let output = lines.withLock { $0.joined(separator: "\n") }
        #expect(Self.listed(output) == [0, 1, 2], "inherited: \(output); the test holds \(held.descriptors)")
    }
}
