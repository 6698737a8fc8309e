import NIOPosix

/// Where a `VarlinkServer` runs its connections' calls: a few threads of their own (a `NIOThreadPool`), the
/// task executor preference of each connection's call task (from the moment a call comes off the wire to
/// its reply, with no hop through the cooperative pool). A handler that blocks its thread (SQLite,
/// libsodium, a lock another call holds) then blocks one of these, never a thread of Swift's cooperative
/// pool, which the server's accept loop and the rest of the process keep using. A service may run its other
/// blocking work here too (`withTaskExecutorPreference`), so that all of it shares the same few threads.
public final class VarlinkHandlerExecutor: TaskExecutor, Sendable {
    private let pool: NIOThreadPool

    /// An executor on `threads` threads of its own (at least one), started at once.
    public init(threads: Int) {
        pool = NIOThreadPool(numberOfThreads: max(threads, 1))
        pool.start()
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        pool.submit { state in
            switch state {
            case .active:
                job.runSynchronously(on: executor)
            case .cancelled:
                // The pool is stopping or stopped: a job is never dropped, it runs on the global executor.
                globalConcurrentExecutor.enqueue(ExecutorJob(job))
            }
        }
    }

    /// Stops the threads once the jobs that are running have returned; jobs still queued, and any enqueued
    /// later, run on Swift's global executor.
    public func shutdown() async {
        try? await pool.shutdownGracefully()
    }
}
