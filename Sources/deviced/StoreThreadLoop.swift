import ServiceLifecycle

/// A broker loop beside the server until the daemon stops (the idle sign-out, the disk reserve's keeper):
/// `body` runs on `executor` (the store's threads, never an event loop) and is cancelled at graceful shutdown.
struct StoreThreadLoop: Service {
    let executor: any TaskExecutor
    let body: @Sendable () async -> Void

    func run() async throws {
        await withTaskExecutorPreference(executor) {
            await cancelWhenGracefulShutdown {
                await body()
            }
        }
    }
}
