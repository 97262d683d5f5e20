import Foundation
import Synchronization
import TestSupport

/// A load generator nobody here wrote the client of: Python's http.client,
/// `threads` keep-alive connections sending one `/v1/send` at a time, each
/// to a token of its own. Prints `OK <apns-id>` for each 200 it has fully
/// read, `STATUS <code> <body>` for any other answer and `ERR <exception>`
/// when a connection dies.
///
/// ``Until/connectionDies``: a thread stops at its first dead connection (one
/// relay, killed). ``Until/inputCloses``: threads reconnect and go on until
/// ``stop()``, as a backend behind a balancer would; the sends carry no
/// idempotency key, so a failed one is never resent, the next is a new push.
final class LoadDriver: Sendable {
    enum Until: String {
        case connectionDies = "error"
        case inputCloses = "input"
    }

    static let script = #"""
        import http.client, json, sys, threading
        port, key, template, threads, until = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
        lock = threading.Lock()
        stop = threading.Event()
        def say(line):
            with lock:
                sys.stdout.write(line + "\n"); sys.stdout.flush()
        def worker(n):
            conn, i = None, 0
            while not stop.is_set():
                i += 1
                try:
                    if conn is None:
                        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                    body = template.replace("TOKEN", "%064x" % (n * 1000000 + i))
                    conn.request("POST", "/v1/send", body=body.encode("utf-8"), headers={"authorization": "Bearer " + key, "content-type": "application/json"})
                    response = conn.getresponse()
                    data = response.read()
                    if response.status == 200:
                        say("OK " + json.loads(data)["apnsId"].lower())
                    else:
                        say("STATUS %d %s" % (response.status, data[:200].decode("utf-8", "replace").replace("\n", " ")))
                    if response.getheader("connection", "").lower() == "close":
                        conn.close(); conn = None
                except Exception as error:
                    say("ERR " + type(error).__name__)
                    if until == "error":
                        return
                    try:
                        conn.close()
                    except Exception:
                        pass
                    conn = None
        workers = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
        for w in workers: w.start()
        if until == "input":
            sys.stdin.read()
            stop.set()
        for w in workers: w.join()
        """#

    /// What the driver printed, appended by the reader thread (a class: the closure shares it).
    private final class Collected: Sendable {
        let lines = Mutex<[String]>([])
    }

    private let child: ChildProcess
    private let collected = Collected()

    /// Starts the driver against `127.0.0.1:port` with the `backend` key, its script written into `directory`.
    init(directory: String, port: UInt16, threads: Int, until: Until) throws {
        let file = directory + "/load-driver-\(UUID().uuidString.prefix(6)).py"
        try Self.script.write(toFile: file, atomically: true, encoding: .utf8)
        child = try ChildProcess(
            ["python3", file, String(port), TestRelay.keys["backend"]!, TestRelay.send(token: "TOKEN"), String(threads), until.rawValue],
            input: until == .inputCloses, standardOutput: .pipe, standardError: .inherit)
        ChildProcess.collectLines(of: child.standardOutput!) { [collected] line in collected.lines.withLock { $0.append(line) } }
    }

    var lines: [String] { collected.lines.withLock { $0 } }
    /// The apns-ids of sends answered 200, lowercased.
    var answered: [String] { lines.filter { $0.hasPrefix("OK ") }.map { String($0.dropFirst(3)) } }
    /// Every line but the 200s: other statuses and dead connections.
    var others: [String] { lines.filter { !$0.hasPrefix("OK ") } }
    var isRunning: Bool { child.isRunning }

    /// Closes the driver's input (``Until/inputCloses``): every thread stops after its current send.
    func stop() throws { try child.standardInput?.close() }
}
