extension Broker1 {
    /// The text of `org.sharedmode.Broker1.varlink`, embedded byte for byte, so `GetInterfaceDescription`
    /// serves exactly the interface this contract was generated from.
    public static let description = String(decoding: PackageResources.org_sharedmode_Broker1_varlink, as: UTF8.self)

    /// Where the system's broker listens (systemd's `RuntimeDirectory=devicectl`, `deviced.socket`).
    public static let defaultSocketPath = "/run/devicectl/broker.sock"

    /// The qualified name of the interface's member `member` (an error or a method).
    public static func qualified(_ member: String) -> String { "\(name).\(member)" }
}
