import NIOPosix

/// Where a `VarlinkMethodHandler`'s calls run: a few threads of their own (a `NIOThreadPool`), set as the
/// executor preference of each call. A handler that blocks its thread (SQLite, libsodium, a lock another
/// call holds) then blocks one of these, never a thread of Swift's cooperative pool, which the server's
/// other connections, its admissions and `org.varlink.service` keep using.
final class HandlerExecutor: TaskExecutor, Sendable {
    private let pool: NIOThreadPool

    /// An executor on `threads` threads of its own, started at once.
    init(threads: Int) {
        pool = NIOThreadPool(numberOfThreads: max(threads, 1))
        pool.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        // After `shutdown` the pool runs a job at once on the caller's thread (state `.cancelled`): a job
        // is never dropped.
        pool.submit { _ in job.runSynchronously(on: executor) }
    }

    /// Stops the threads once the jobs submitted have run.
    func shutdown() async {
        try? await pool.shutdownGracefully()
    }
}
