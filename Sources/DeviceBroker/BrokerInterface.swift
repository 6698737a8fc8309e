/// The broker's varlink interface, `org.sharedmode.Broker1`: its name and its `.varlink` file, embedded
/// in the binary byte for byte, so `GetInterfaceDescription` serves exactly the documented API.
public enum BrokerInterface {
    /// The interface name (major version 1).
    public static let name = "org.sharedmode.Broker1"

    /// The text of `org.sharedmode.Broker1.varlink`.
    public static let description = String(decoding: PackageResources.org_sharedmode_Broker1_varlink, as: UTF8.self)

    /// The qualified name of the interface's error `member`.
    static func error(_ member: String) -> String { "\(name).\(member)" }
}
