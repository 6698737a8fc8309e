/// Why a device policy file was rejected: the JSON path of the offending value and what was expected.
public struct PolicyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Where in the document, e.g. `apps[1].accessGroups[0]`; `(document)` for the whole file.
    public let path: String
    /// What is wrong and what is expected.
    public let problem: String

    /// An error at `path` (as printed, e.g. `apps[1].id`).
    public init(path: String, problem: String) {
        self.path = path
        self.problem = problem
    }

    init(_ path: JSONPath, _ problem: String) {
        self.path = path.description
        self.problem = problem
    }

    init(file: String, _ problem: String) {
        path = file
        self.problem = problem
    }

    public var description: String { "\(path): \(problem)" }

    /// A policy document over `InputLimits.policyDocumentBytes`.
    static let documentTooLarge = PolicyError(
        path: "(document)",
        problem:
            "the policy is larger than \(InputLimits.describe(bytes: InputLimits.policyDocumentBytes)), the limit for a policy file; nothing was read past the limit"
    )
}
