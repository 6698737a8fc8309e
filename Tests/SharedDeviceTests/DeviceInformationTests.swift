import Foundation
import KeychainStore
import SharedDevice
import StoreTestSupport
import Testing

/// What apps learn about the device (MSAL's `getDeviceInformation`), in every state the device can be in.
struct DeviceInformationTests {
    private func expectDefault(_ information: DeviceInformation, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(information == .default, sourceLocation: sourceLocation)
        #expect(information.mode == .private, sourceLocation: sourceLocation)
        #expect(information.deviceID == nil, sourceLocation: sourceLocation)
        #expect(information.extraDeviceInformation["joinStatus"] == "notProvisioned", sourceLocation: sourceLocation)
        #expect(information.extraDeviceInformation["ssoProviderInstalled"] == "false", sourceLocation: sourceLocation)
    }

    /// A state directory whose store was provisioned with the kiosk policy and then closed.
    private func provisionedDirectory(clock: FakeClock) throws -> (TemporaryStateDirectory, DeviceRecord) {
        let directory = TemporaryStateDirectory()
        let record = try ManagedDevice(store: try openStore(directory, clock: clock))
            .provision(policyDocument: try Policies.kiosk(), actor: DeviceFixture.admin).record
        return (directory, record)
    }

    @Test func aDeviceWithNoStateDirectoryIsPrivateWithoutErrorAndNothingIsCreated() throws {
        let directory = TemporaryStateDirectory(create: false)
        let (information, error) = DeviceInformation.current(stateDirectory: directory.url)
        expectDefault(information)
        #expect(error == nil)
        #expect(!directory.exists)
    }

    @Test func anEmptyStoreIsPrivateWithoutError() throws {
        let fixture = try DeviceFixture()
        let (information, error) = fixture.device.information()
        expectDefault(information)
        #expect(error == nil)
        let (current, currentError) = DeviceInformation.current(stateDirectory: fixture.directory.url)
        expectDefault(current)
        #expect(currentError == nil)
    }

    @Test func aProvisionedKioskIsSharedWithItsIDsNamePolicyAndDates() throws {
        let clock = FakeClock()
        let (directory, record) = try provisionedDirectory(clock: clock)
        let (information, error) = DeviceInformation.current(stateDirectory: directory.url)
        #expect(error == nil)
        #expect(information.mode == .shared)
        #expect(information.deviceID == record.deviceID)
        #expect(information.deviceName == "Front desk kiosk 3")
        #expect(information.policyID == "contoso-frontdesk-kiosk-2026-11")
        #expect(information.policySHA256 == (try sha256sum(try Policies.kiosk())))
        #expect(information.provisionedAt == FakeClock.start)
        #expect(information.policyAppliedAt == FakeClock.start)
        #expect(
            information.extraDeviceInformation == [
                "ssoProviderInstalled": "true", "ssoProviderMode": "shared", "joinStatus": "provisioned",
                "brokerVersion": DeviceInformation.brokerVersion, "deviceIdentifier": record.deviceID,
                "authority": "http://127.0.0.1:4593/api/oidc", "clientId": "kiosk-apps",
            ]
        )
        // The open device answers the same.
        let device = ManagedDevice(store: try openStore(directory, clock: clock))
        #expect(device.information().information == information)
        #expect(device.information().error == nil)
    }

    @Test func theJSONFormUsesMSALStyleKeys() throws {
        let clock = FakeClock()
        let (directory, record) = try provisionedDirectory(clock: clock)
        let information = DeviceInformation.current(stateDirectory: directory.url).information
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        let object = try #require(
            try JSONSerialization.jsonObject(with: try encoder.encode(information)) as? [String: Any]
        )
        #expect(
            Set(object.keys) == [
                "mode", "deviceId", "deviceName", "policyId", "policySha256", "provisionedAt", "policyAppliedAt",
                "extraDeviceInformation",
            ]
        )
        #expect(object["mode"] as? String == "shared")
        #expect(object["deviceId"] as? String == record.deviceID)
        let unprovisioned = try #require(
            try JSONSerialization.jsonObject(with: try encoder.encode(DeviceInformation.default)) as? [String: Any]
        )
        #expect(unprovisioned["mode"] as? String == "private")
        #expect(unprovisioned["deviceId"] == nil)
    }

    @Test func afterAForcedChangeToThePersonalPolicyTheDeviceIsPrivateWithTheSameID() throws {
        let fixture = try DeviceFixture()
        let record = try fixture.provision(try Policies.kiosk()).record
        fixture.clock.advance(by: 3600)
        try fixture.provision(try Policies.personal(), force: true)

        let (information, error) = fixture.device.information()
        #expect(error == nil)
        #expect(information.mode == .private)
        #expect(information.deviceID == record.deviceID)
        #expect(information.deviceName == "Dana's field laptop")
        #expect(information.policyID == "contoso-personal-2026-11")
        #expect(information.policySHA256 == (try sha256sum(try Policies.personal())))
        #expect(information.provisionedAt == FakeClock.start)
        #expect(information.policyAppliedAt == FakeClock.start.addingTimeInterval(3600))
        #expect(information.extraDeviceInformation["ssoProviderMode"] == "private")
        #expect(information.extraDeviceInformation["joinStatus"] == "provisioned")
        #expect(information.extraDeviceInformation["clientId"] == "4b0db8c2-9f26-4417-8bde-3f0e3656f8e0")
        #expect(DeviceInformation.current(stateDirectory: fixture.directory.url).information == information)
    }

    @Test func afterDeprovisioningTheDeviceReportsTheDefault() throws {
        let fixture = try DeviceFixture()
        try fixture.provision(try Policies.kiosk())
        _ = try fixture.device.deprovision(actor: DeviceFixture.admin)
        let (information, error) = fixture.device.information()
        expectDefault(information)
        #expect(error == nil)
        let (current, currentError) = DeviceInformation.current(stateDirectory: fixture.directory.url)
        expectDefault(current)
        #expect(currentError == nil)
    }

    @Test func aDatabaseOverwrittenWithGarbageGivesTheDefaultAndACorruptStoreError() throws {
        let (directory, _) = try provisionedDirectory(clock: FakeClock())
        _ = FileManager.default.createFile(atPath: directory.databasePath, contents: Data(repeating: 0x5A, count: 8192))
        try? FileManager.default.removeItem(atPath: directory.databasePath + "-wal")
        try? FileManager.default.removeItem(atPath: directory.databasePath + "-shm")

        let (information, error) = DeviceInformation.current(stateDirectory: directory.url)
        expectDefault(information)
        #expect(error?.code == .store)
        #expect(error?.storeError?.code == .corruptStore)
    }

    @Test func aWrongKeyFileGivesTheDefaultAndAWrongKeyErrorAndChangesNothing() throws {
        let (directory, _) = try provisionedDirectory(clock: FakeClock())
        let before = try RawDatabase(path: directory.databasePath).dump()
        try FileManager.default.removeItem(at: directory.keyFile)
        _ = FileManager.default.createFile(
            atPath: directory.keyFile.path,
            contents: Data((0..<32).map { UInt8($0) }),
            attributes: [.posixPermissions: 0o600]
        )

        let (information, error) = DeviceInformation.current(stateDirectory: directory.url)
        expectDefault(information)
        #expect(error?.code == .store)
        #expect(error?.storeError?.code == .wrongKey)
        #expect(try RawDatabase(path: directory.databasePath).dump() == before)
    }

    @Test func aMissingKeyFileGivesTheDefaultAndAWrongKeyErrorAndNoNewKey() throws {
        let (directory, _) = try provisionedDirectory(clock: FakeClock())
        try FileManager.default.removeItem(at: directory.keyFile)
        let (information, error) = DeviceInformation.current(stateDirectory: directory.url)
        expectDefault(information)
        #expect(error?.storeError?.code == .wrongKey)
        #expect(!FileManager.default.fileExists(atPath: directory.keyFile.path))
    }

    @Test func aTamperedDeviceRecordGivesTheDefaultAndAnError() throws {
        let fixture = try DeviceFixture()
        try fixture.provision(try Policies.kiosk())
        let raw = try fixture.raw()
        // Append a byte to every sealed item: the device record no longer authenticates.
        try raw.execute("UPDATE items SET ciphertext = CAST(ciphertext AS BLOB) || x'00'")
        let (information, error) = fixture.device.information()
        expectDefault(information)
        #expect(error?.code == .store)
        #expect(error?.storeError?.code == .integrityFailure)
        #expect(DeviceInformation.current(stateDirectory: fixture.directory.url).error != nil)
    }
}
