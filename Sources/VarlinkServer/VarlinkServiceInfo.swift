import Varlink

/// What `org.varlink.service.GetInfo` and `GetInterfaceDescription` answer.
public struct VarlinkServiceInfo: Sendable {
    public var vendor: String
    public var product: String
    public var version: String
    public var url: String
    /// The service's interfaces: name and the verbatim text of its `.varlink` file.
    public var interfaces: [(name: String, description: String)]

    /// Service information; `org.varlink.service` is added to the interfaces by the server.
    public init(
        vendor: String,
        product: String,
        version: String,
        url: String,
        interfaces: [(name: String, description: String)]
    ) {
        self.vendor = vendor
        self.product = product
        self.version = version
        self.url = url
        self.interfaces = interfaces
    }

    /// The description of `org.varlink.service` (from the varlink specification).
    public static let serviceInterfaceDescription = """
        # The Varlink Service Interface is provided by every varlink service. It
        # describes the service and the interfaces it implements.
        interface org.varlink.service

        # Get a list of all the interfaces a service provides and information
        # about the implementation.
        method GetInfo() -> (
          vendor: string,
          product: string,
          version: string,
          url: string,
          interfaces: []string
        )

        # Get the description of an interface that is implemented by this service.
        method GetInterfaceDescription(interface: string) -> (description: string)

        # The requested interface was not found.
        error InterfaceNotFound (interface: string)

        # The requested method was not found
        error MethodNotFound (method: string)

        # The interface defines the requested method, but the service does not
        # implement it.
        error MethodNotImplemented (method: string)

        # One of the passed parameters is invalid.
        error InvalidParameter (parameter: string)

        # Client is denied access
        error PermissionDenied ()

        # Method is expected to be called with 'more' set to true, but wasn't
        error ExpectedMore ()

        """

    /// The reply to a call of `org.varlink.service`.
    func answer(_ call: VarlinkCall) -> VarlinkReply {
        switch call.member {
        case "GetInfo":
            return VarlinkReply(parameters: [
                "vendor": .string(vendor), "product": .string(product), "version": .string(version),
                "url": .string(url),
                "interfaces": .array((["org.varlink.service"] + interfaces.map(\.name)).map(VarlinkValue.string)),
            ])
        case "GetInterfaceDescription":
            guard let name = call.parameters["interface"]?.string else { return .invalidParameter("interface") }
            if name == "org.varlink.service" {
                return VarlinkReply(parameters: ["description": .string(Self.serviceInterfaceDescription)])
            }
            guard let interface = interfaces.first(where: { $0.name == name }) else { return .interfaceNotFound(name) }
            return VarlinkReply(parameters: ["description": .string(interface.description)])
        default:
            return .methodNotFound(call.method)
        }
    }
}
