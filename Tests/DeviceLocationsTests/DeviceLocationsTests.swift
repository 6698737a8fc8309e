import DeviceLocations
import Foundation
import Testing

/// The executables' documented search order for the store, the broker's socket and the trusted broker users.
@Suite struct DeviceLocationsTests {
    @Test func stateDirectoryFollowsTheDocumentedOrder() {
        #expect(DeviceLocations.stateDirectory(explicit: "/x", environment: ["DEVICECTL_STATE_DIR": "/y"]).path == "/x")
        #expect(DeviceLocations.stateDirectory(environment: ["DEVICECTL_STATE_DIR": "/y"], isRoot: true).path == "/y")
        #expect(DeviceLocations.stateDirectory(environment: [:], isRoot: true).path == "/var/lib/devicectl")
        #expect(
            DeviceLocations.stateDirectory(environment: ["XDG_STATE_HOME": "/s", "HOME": "/h"], isRoot: false).path
                == "/s/devicectl"
        )
        #expect(
            DeviceLocations.stateDirectory(environment: ["XDG_STATE_HOME": "relative", "HOME": "/h"], isRoot: false)
                .path
                == "/h/.local/state/devicectl"
        )
        #expect(
            DeviceLocations.stateDirectory(environment: ["HOME": "/h"], isRoot: false).path
                == "/h/.local/state/devicectl"
        )
    }

    @Test func namedStateDirectoryIsTheOptionElseTheEnvironment() {
        #expect(DeviceLocations.namedStateDirectory(explicit: "/x", environment: ["DEVICECTL_STATE_DIR": "/y"]) == "/x")
        #expect(DeviceLocations.namedStateDirectory(explicit: "", environment: ["DEVICECTL_STATE_DIR": "/y"]) == "/y")
        #expect(DeviceLocations.namedStateDirectory(explicit: nil, environment: ["DEVICECTL_STATE_DIR": ""]) == nil)
    }

    @Test func brokerSocketIsTheOptionElseTheEnvironmentElseTheSystemSocket() {
        #expect(DeviceLocations.brokerSocket(explicit: "/a", environment: ["DEVICECTL_SOCKET": "/b"]) == "/a")
        #expect(DeviceLocations.brokerSocket(environment: ["DEVICECTL_SOCKET": "/b"]) == "/b")
        #expect(DeviceLocations.brokerSocket(environment: [:]) == "/run/devicectl/broker.sock")
        #expect(DeviceLocations.systemBrokerSocket == "/run/devicectl/broker.sock")
    }

    @Test func trustedBrokerUsersComeFromACommaSeparatedList() {
        #expect(
            DeviceLocations.alsoTrustedBrokerUIDs(environment: ["DEVICECTL_BROKER_UID": "1003, 1004,x,"]) == [
                1003, 1004,
            ]
        )
        #expect(DeviceLocations.alsoTrustedBrokerUIDs(environment: [:]).isEmpty)
    }
}
