public import Synchronization

/// The tasks that run the server's handlers, kept from one request to the next.
///
/// Each request used to start a task of its own on libmicrohttpd's thread. A
/// task keeps its async frames in a stack allocator of its own, whose slabs
/// (a kilobyte, or a large frame's size) are `malloc`ed as the handler's
/// call chain deepens and freed only with the task: a task per request paid
/// about 35 slab allocations and frees per request, some 55 KB, for the
/// same frames every time. A worker that has answered now waits here for
/// the next request instead of ending, and its slabs serve that request
/// too; a request that finds no worker waiting starts a new one, as before.
/// Handing a request to a waiting worker resumes it on Swift's pool like a
/// new task's first job: the same one hop.
///
/// At most `maximumWaiting` workers wait; one more ends when it has
/// answered, so a burst of concurrent requests does not keep its tasks
/// (and their slabs) for good. ``close()`` ends the waiting ones.
///
/// libmicrohttpd's server (`MHDServerCore`) and the HTTP/2 APNs ingress
/// (RelayServer) run their handlers on one each.
///
/// Its code is `@inlinable` so a user in another module gets it specialised
/// for its job type: the HTTP/2 ingress's worker hop, unspecialised, spent
/// some 4,500 instructions a request in generic metadata accessors and
/// witness calls (libmicrohttpd's server, in this module, always had it
/// specialised).
public final class HandlerWorkers<Job: Sendable>: Sendable {
    @usableFromInline
    struct State {
        @usableFromInline var waiting: [UnsafeContinuation<Job?, Never>] = []
        @usableFromInline var closed = false
        /// Workers started since init, for tests.
        @usableFromInline var started = 0

        @usableFromInline init() {}
    }

    @usableFromInline let state = Mutex(State())
    @usableFromInline let maximumWaiting: Int
    @usableFromInline let handle: @Sendable (Job) async -> Void

    /// - Parameter handle: runs one job; a worker runs one at a time.
    public init(maximumWaiting: Int, handle: @escaping @Sendable (Job) async -> Void) {
        self.maximumWaiting = maximumWaiting
        self.handle = handle
    }

    /// Workers waiting for a job.
    var waitingCount: Int { state.withLock { $0.waiting.count } }

    /// Workers started since init (each a task).
    var startedCount: Int { state.withLock { $0.started } }

    /// Runs `job` on a waiting worker, else on a new one. Never waits.
    @inlinable
    public func run(_ job: Job) {
        let worker = state.withLock { state -> UnsafeContinuation<Job?, Never>? in
            if let worker = state.waiting.popLast() { return worker }
            state.started += 1
            return nil
        }
        if let worker {
            worker.resume(returning: job)
            return
        }
        // The first job goes through a box the worker empties, so the task's
        // closure does not keep it (its request and body) while it waits.
        let first = FirstJob(job)
        Task { await self.work(first) }
    }

    /// Ends every waiting worker; later ones end when they have answered.
    @inlinable
    public func close() {
        let waiting = state.withLock { state in
            state.closed = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for worker in waiting { worker.resume(returning: nil) }
    }

    @inlinable
    func work(_ first: FirstJob) async {
        var next = first.take()
        while next != nil {
            // A cancelled task stays cancelled: a job it would serve gets a
            // task of its own, as if no worker had been waiting.
            if Task.isCancelled {
                let fresh = FirstJob(next.take()!)
                state.withLock { $0.started += 1 }
                Task { await self.work(fresh) }
                return
            }
            next = await serve(next.take()!)
        }
    }

    /// Runs `job`, lets go of it, then waits for the next one (nil: end).
    /// A handler may cancel its own task (the batch route does at its
    /// deadline, `BatchRunner.runBatch`), and every later job of that task would
    /// find itself cancelled: such a worker ends instead of waiting.
    @inlinable
    func serve(_ job: consuming Job) async -> Job? {
        await handle(job)
        _ = consume job
        if Task.isCancelled { return nil }
        return await withUnsafeContinuation { continuation in
            let waits = state.withLock { state -> Bool in
                guard !state.closed, state.waiting.count < maximumWaiting else { return false }
                state.waiting.append(continuation)
                return true
            }
            if !waits { continuation.resume(returning: nil) }
        }
    }

    /// A worker's first job, taken out once.
    @usableFromInline
    final class FirstJob: @unchecked Sendable {
        // Written in init, emptied once by the worker's task before anything else reads it.
        @usableFromInline var job: Job?
        @usableFromInline init(_ job: Job) { self.job = job }
        @inlinable func take() -> Job? { job.take() }
    }
}
