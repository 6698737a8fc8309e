import Foundation
import KeychainStore
import Logging
import SharedDevice
import Synchronization

// The disk reserve (space kept beside the store for sign-outs on a full disk): made again as soon as there
// is room after a sign-out used it — after every account change and on the daemon's timer, never on an
// app's keychain write (an app filling the disk must not be able to trade its items for the reserve).
extension Broker {
    /// How often the daemon checks that the reserve is in place.
    public static let diskReserveCheckInterval: Duration = .seconds(2)

    /// Whether the disk reserve is in place now.
    var hasDiskReserve: Bool { device.store.hasDiskReserve }

    /// Makes the disk reserve again if it is missing and there is room; logs (at notice, once per change)
    /// whether it is missing or back.
    public func remakeDiskReserveIfMissing() {
        do {
            // Returns at once when the reserve is in place.
            try device.store.keepDiskReserve()
            if diskReserveMissing.withLock({ state in
                defer { state = false }
                return state
            }) {
                logger.notice("the disk reserve for sign-outs on a full disk is in place again")
            }
        } catch {
            if !diskReserveMissing.withLock({ state in
                defer { state = true }
                return state
            }) {
                logger.warning(
                    "no disk reserve for sign-outs on a full disk: \(error.message); free space on the state directory's filesystem"
                )
            }
        }
    }

    /// Keeps the disk reserve in place until the task is cancelled (the daemon runs it beside its server).
    public func runDiskReserveKeeper(every interval: Duration = diskReserveCheckInterval) async {
        while !Task.isCancelled {
            remakeDiskReserveIfMissing()
            try? await Task.sleep(for: interval)
        }
    }
}
