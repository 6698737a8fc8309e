import NIOCore

/// Runs a task's jobs on one SwiftNIO event loop: the task executor preference of a connection's calls when
/// `VarlinkServerConfiguration.runsCallsOnEventLoop` is set, so that a call coming off the wire, its
/// handler and its reply run on the loop's own thread, with no wake-up of another thread in between. A
/// handler that blocks then blocks every connection of that loop.
final class EventLoopTaskExecutor: TaskExecutor, Sendable {
    private let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        eventLoop.execute { job.runSynchronously(on: executor) }
    }
}
