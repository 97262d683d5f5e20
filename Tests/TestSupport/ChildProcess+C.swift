import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// posix_spawn, pipes, signals and waitpid for ``ChildProcess``.
///
/// Why not Foundation's Process: on Linux it closes the descriptors it finds
/// open when it scans /proc/self/fd, so one another thread opens in between
/// (a test server accepting a connection, a concurrent spawn's pipe) still
/// leaks into the child; and it hands every child one end of its own
/// exit-notification socket, so a daemon the child leaves behind (pg_ctl's
/// postgres) keeps Process from ever seeing the exit. Here the child closes
/// every descriptor above 2 itself, between fork and exec
/// (posix_spawn_file_actions_addclosefrom_np, glibc 2.34), and exit is
/// learnt from waitpid on a thread of the child's own.
extension ChildProcess {
    struct Spawned {
        var pid: Int32
        var input: FileHandle?
        var output: FileHandle?
        var error: FileHandle?
    }

    struct SpawnError: Error, CustomStringConvertible {
        var description: String
    }

    static func spawn(
        _ arguments: [String], environment: [String], input: Bool, standardOutput: Output, standardError: Output
    ) throws -> Spawned {
        var actions = posix_spawn_file_actions_t()
        try check(posix_spawn_file_actions_init(&actions), "posix_spawn_file_actions_init")
        defer { posix_spawn_file_actions_destroy(&actions) }
        // Parent ends of the pipes, and the child ends to close once it runs.
        var parentEnds: [Int32] = []
        var childEnds: [Int32] = []
        var failed = true
        defer {
            for fd in childEnds { close(fd) }
            if failed { for fd in parentEnds { close(fd) } }
        }

        func pipeEnds() throws -> (read: Int32, write: Int32) {
            var fds: [Int32] = [-1, -1]
            try check(pipe(&fds) == 0 ? 0 : errno, "pipe")
            // FD_CLOEXEC (pipe2 is not in the Glibc module): no child started
            // meanwhile by code that does not close descriptors holds these
            // ends and delays EOF. posix_spawn's dup2 clears it on the copy.
            for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            return (fds[0], fds[1])
        }

        var inputEnd: Int32?
        if input {
            let ends = try pipeEnds()
            parentEnds.append(ends.write)
            childEnds.append(ends.read)
            inputEnd = ends.write
            try check(posix_spawn_file_actions_adddup2(&actions, ends.read, 0), "adddup2 stdin")
        } else {
            try check(posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0), "addopen stdin")
        }

        func route(_ output: Output, to target: Int32) throws -> Int32? {
            switch output {
            case .discard:
                try check(posix_spawn_file_actions_addopen(&actions, target, "/dev/null", O_WRONLY, 0), "addopen /dev/null")
            case .inherit:
                break
            case .file(let path):
                try check(
                    posix_spawn_file_actions_addopen(&actions, target, path, O_WRONLY | O_CREAT | O_TRUNC, 0o644),
                    "addopen \(path)")
            case .sameAsStandardOutput:
                try check(posix_spawn_file_actions_adddup2(&actions, 1, target), "adddup2 stderr")
            case .pipe:
                let ends = try pipeEnds()
                parentEnds.append(ends.read)
                childEnds.append(ends.write)
                try check(posix_spawn_file_actions_adddup2(&actions, ends.write, target), "adddup2")
                return ends.read
            }
            return nil
        }
        let outputEnd = try route(standardOutput, to: 1)
        let errorEnd = try route(standardError, to: 2)
        try closeInheritedDescriptors(&actions)

        var attributes = posix_spawnattr_t()
        try check(posix_spawnattr_init(&attributes), "posix_spawnattr_init")
        defer { posix_spawnattr_destroy(&attributes) }
        // A process group of its own (as Foundation's Process does), no
        // blocked signals, and SIGPIPE back to its default: a test runner
        // that ignores SIGPIPE must not pass that on to curl or a server.
        var mask = sigset_t()
        sigemptyset(&mask)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE)
        try check(posix_spawnattr_setsigmask(&attributes, &mask), "setsigmask")
        try check(posix_spawnattr_setsigdefault(&attributes, &defaults), "setsigdefault")
        try check(posix_spawnattr_setpgroup(&attributes, 0), "setpgroup")
        try check(
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)),
            "setflags")

        var pid: pid_t = 0
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        let status = posix_spawnp(&pid, arguments[0], &actions, &attributes, argv, envp)
        guard status == 0 else {
            throw SpawnError(description: "cannot start \(arguments[0]): \(String(cString: strerror(status)))")
        }
        failed = false
        return Spawned(
            pid: pid,
            input: inputEnd.map { FileHandle(fileDescriptor: $0, closeOnDealloc: true) },
            output: outputEnd.map { FileHandle(fileDescriptor: $0, closeOnDealloc: true) },
            error: errorEnd.map { FileHandle(fileDescriptor: $0, closeOnDealloc: true) })
    }

    /// The last file action: close every descriptor above 2 in the child.
    private static func closeInheritedDescriptors(_ actions: inout posix_spawn_file_actions_t) throws {
        // Declared by glibc's spawn.h only under _DEFAULT_SOURCE, which the
        // Glibc module does not see; looked up at run time instead.
        typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        if let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") {
            let addCloseFrom = unsafeBitCast(symbol, to: AddCloseFrom.self)
            try check(addCloseFrom(&actions, 3), "addclosefrom_np")
            return
        }
        // An older glibc: close what is open now (a descriptor opened later
        // by another thread can still leak, as with Foundation's Process).
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?.compactMap { Int32($0) } ?? []
        for fd in open where fd > 2 {
            try check(posix_spawn_file_actions_addclose(&actions, fd), "addclose")
        }
    }

    /// Waits for `pid` on a thread of its own and publishes its status.
    static func reap(_ pid: Int32, into exit: ExitState) {
        let thread = Thread {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) == -1 {
                guard errno == EINTR else {
                    exit.publish(-1)
                    return
                }
            }
            let signal = status & 0x7f
            exit.publish(signal == 0 ? (status >> 8) & 0xff : signal)
        }
        thread.start()
    }

    static func send(_ signal: Int32, to pid: Int32) {
        _ = Glibc.kill(pid, signal)
    }

    private static func check(_ status: Int32, _ what: String) throws {
        guard status == 0 else { throw SpawnError(description: "\(what): \(String(cString: strerror(status)))") }
    }
}
