public import Foundation

/// Runs the command-line tools tests use as independent implementations
/// (openssl, psql, promtool, curl, python3) and returns what they said.
/// Each is a ``ChildProcess``: it inherits no descriptor of the test process
/// but the standard ones.
public enum ProcessRunner {
    /// What a command wrote, its standard streams apart.
    public struct Outcome: Sendable {
        public var status: Int32
        public var standardOutput: Data
        public var standardError: Data
    }

    /// Runs `arguments` (the command looked up in PATH), feeding `input` on stdin.
    /// Returns the exit status and stdout+stderr; never throws for a
    /// non-zero status, so callers can assert on failures too.
    public static func run(_ arguments: [String], input: Data? = nil) throws -> (status: Int32, output: String) {
        let child = try ChildProcess(arguments, input: input != nil, standardOutput: .pipe, standardError: .sameAsStandardOutput)
        feed(child, input)
        let data = child.standardOutput!.readDataToEndOfFile()
        return (child.waitUntilExit(), String(decoding: data, as: UTF8.self))
    }

    /// Like ``run(_:input:)`` with standard output and standard error kept apart.
    public static func capture(_ arguments: [String], input: Data? = nil) throws -> Outcome {
        let child = try ChildProcess(arguments, input: input != nil, standardOutput: .pipe, standardError: .pipe)
        feed(child, input)
        // Both pipes drained at once: a child that fills one while the other
        // is read would otherwise wait for ever.
        let errors = Drain(child.standardError!)
        let output = child.standardOutput!.readDataToEndOfFile()
        return Outcome(status: child.waitUntilExit(), standardOutput: output, standardError: errors.data())
    }

    private static func feed(_ child: ChildProcess, _ input: Data?) {
        guard let input, let handle = child.standardInput else { return }
        // Written from a thread of its own: a child that answers before
        // reading all its input must not block the reader of its output.
        let thread = Thread {
            try? handle.write(contentsOf: input)
            try? handle.close()
        }
        thread.start()
    }

    /// A pipe read to EOF on a thread of its own.
    private final class Drain: @unchecked Sendable {
        // `result` is written once by the thread before `done` is signalled.
        private var result = Data()
        private let done = DispatchSemaphore(value: 0)

        init(_ handle: FileHandle) {
            let thread = Thread { [self] in
                result = handle.readDataToEndOfFile()
                done.signal()
            }
            thread.start()
        }

        func data() -> Data {
            done.wait()
            return result
        }
    }
}

extension ProcessRunner {
    /// ``run(_:input:)`` on a thread of its own: waiting for a child process
    /// must not hold one of the two cooperative threads that in-process
    /// servers under test need to answer it (nor a Dispatch global queue:
    /// on Linux its width is the core count).
    public static func runOffPool(_ arguments: [String], input: Data? = nil) async throws -> (status: Int32, output: String) {
        try await offPool { try run(arguments, input: input) }
    }

    /// ``capture(_:input:)`` on a thread of its own.
    public static func captureOffPool(_ arguments: [String], input: Data? = nil) async throws -> Outcome {
        try await offPool { try capture(arguments, input: input) }
    }

    private static func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                continuation.resume(with: Result { try body() })
            }
            thread.start()
        }
    }
}
