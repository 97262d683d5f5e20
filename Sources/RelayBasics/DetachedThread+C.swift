import Glibc

/// A thread of the relay's own, started with `pthread_create` so that a
/// start that fails is an answer the caller acts on.
///
/// Foundation's `Thread.start()` ignores `pthread_create`'s result: out of
/// threads (a container's pids limit, `RLIMIT_NPROC`, memory for the stack)
/// the thread's body silently never runs. An accepted connection whose
/// set-up thread never ran stayed open and counted against the listener's
/// caps for good; an APNs connection whose thread never ran left its
/// callers waiting; a watcher marked running that never ran watched
/// nothing again. Every thread the relay starts while it serves starts
/// here, and says when it could not.
public enum DetachedThread {
    /// Why no thread was started.
    public struct StartFailure: Error, CustomStringConvertible, Sendable {
        /// `pthread_create`'s error (EAGAIN: out of threads, or of memory for one).
        public let code: Int32
        /// "pthread_create: " and the system's words for `code`.
        public var reason: String { "pthread_create: \(String(cString: strerror(code)))" }
        public var description: String { "no thread (\(reason))" }

        public init(code: Int32) { self.code = code }
    }

    /// How a part that starts threads as it runs starts them: ``start(name:_:)``
    /// in the relay; a test hands in one that fails (as the system does at a
    /// pids limit) to check what the part does then.
    public typealias Starter = @Sendable (_ name: String, _ body: @escaping @Sendable () -> Void) throws(StartFailure) -> Void

    /// Runs `body` on a new detached thread called `name` (the system keeps
    /// its first 15 bytes: `top -H`, /proc, gdb). When this throws, `body`
    /// never runs and nothing of it is kept.
    public static func start(name: String, _ body: @escaping @Sendable () -> Void) throws(StartFailure) {
        let box = Unmanaged.passRetained(Body(name: name, body)).toOpaque()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        var thread = pthread_t()
        let status = pthread_create(&thread, &attributes, { raw in
            let box = Unmanaged<Body>.fromOpaque(raw!).takeRetainedValue()
            // Named from inside: a name set from another thread races its start.
            if let setName = DetachedThread.setName { _ = box.name.withCString { setName(pthread_self(), $0) } }
            box.body()
            return nil
        }, box)
        guard status != 0 else { return }
        Unmanaged<Body>.fromOpaque(box).release()
        throw StartFailure(code: status)
    }

    /// glibc's `pthread_setname_np`, which the Glibc module leaves out
    /// (it is declared only under `_GNU_SOURCE`); nil where it is missing.
    private static let setName: (@convention(c) (pthread_t, UnsafePointer<CChar>) -> Int32)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "pthread_setname_np") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (pthread_t, UnsafePointer<CChar>) -> Int32).self)
    }()

    private final class Body {
        let name: String
        let body: @Sendable () -> Void

        init(name: String, _ body: @escaping @Sendable () -> Void) {
            // pthread_setname_np refuses (ERANGE) a name over 15 bytes outright.
            var bytes = Array(name.utf8.prefix(15))
            while !bytes.isEmpty, String(validating: bytes, as: UTF8.self) == nil { bytes.removeLast() }
            self.name = String(decoding: bytes, as: UTF8.self)
            self.body = body
        }
    }
}
