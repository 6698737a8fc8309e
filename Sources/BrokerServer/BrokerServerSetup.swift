import BrokerContract
public import DeviceBroker
import SharedDevice
public import VarlinkServer

extension VarlinkServiceInfo {
    /// What `org.varlink.service.GetInfo` says of the broker, and the interface it serves.
    public static let broker = VarlinkServiceInfo(
        vendor: "Shared device mode for Linux",
        product: "deviced",
        version: DeviceInformation.brokerVersion,
        url: "urn:sharedmode:deviced",
        interfaces: [(Broker1.name, Broker1.description)]
    )
}

extension VarlinkServerConfiguration {
    /// The server's limits at their defaults, its errors the broker's interface's, its connection slots
    /// shared out by `broker`'s policy (`BrokerAdmission`).
    public static func broker(_ broker: Broker) -> VarlinkServerConfiguration {
        var configuration = VarlinkServerConfiguration(errorInterface: Broker1.name)
        configuration.admission = BrokerAdmission(broker: broker)
        return configuration
    }
}
