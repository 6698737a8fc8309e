import KeychainStore
import SharedDevice
import Synchronization

/// The device record and its policy as of the store's change stamp: decrypted and decoded again only
/// after a commit (one indexed read per call otherwise).
final class DevicePolicyCache: Sendable {
    private let device: ManagedDevice
    private let cached = Mutex<Known?>(nil)

    /// The record and policy as of a change stamp: one reference, so that a call takes them without copying them.
    final class Known: Sendable {
        let stamp: StoreChangeStamp
        let record: DeviceRecord?
        let policy: DevicePolicy?

        init(stamp: StoreChangeStamp, record: DeviceRecord?, policy: DevicePolicy?) {
            self.stamp = stamp
            self.record = record
            self.policy = policy
        }
    }

    init(device: ManagedDevice) {
        self.device = device
    }

    /// The device record and policy as of the last `current()`, with the store's change stamp then; nothing is
    /// read. A caller holds its answer to the stamp in the transaction that acts on it
    /// (`ApplicationEngine.acquireTokenSilent(…, ifStoreUnchangedSince:)`), or calls `current()`.
    func lastKnown() -> Known? {
        cached.withLock { $0 }
    }

    /// The device record and policy now (`nil` when the device is not provisioned).
    func current() throws(BrokerFailure) -> (record: DeviceRecord?, policy: DevicePolicy?) {
        do {
            let stamp =
                try device.store.changeStampIfUnchanged() ?? device.store.readTransaction { tx in try tx.changeStamp() }
            if let cached = cached.withLock({ $0 }), cached.stamp == stamp { return (cached.record, cached.policy) }
            let record = try device.record()
            let policy = try record?.policy()
            cached.withLock { $0 = Known(stamp: stamp, record: record, policy: policy) }
            return (record, policy)
        } catch {
            // A store error stays one (KeychainError reply with its OSStatus).
            throw BrokerFailure(SharedDeviceError.wrapping(error))
        }
    }
}
