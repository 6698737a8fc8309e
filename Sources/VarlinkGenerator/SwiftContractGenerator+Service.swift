// The server side of a contract: the `Service` protocol a server implements, one method per interface
// method, and the `dispatch` that routes a decoded call to it.

extension SwiftContractGenerator {
    /// `protocol Service` and its `dispatch`. A method whose comment says `@streams` gets a
    /// `VarlinkReplyStream` for its replies and must be called with `more`; any other returns its one reply.
    func service(into out: inout SwiftWriter) {
        out.line("")
        out.line("extension \(namespace) {")
        out.indented { out in
            out.line(
                "/// The server side of the interface: one method per interface method, each given the call's decoded"
            )
            out.line(
                "/// parameters and the server's `Context` for the call (who is calling, say). `dispatch(_:more:context:reply:)`"
            )
            out.line("/// routes a decoded `Call` to them.")
            out.line("public protocol Service: Sendable {")
            out.indented { out in
                out.line("/// What the server passes along with each call's parameters.")
                out.line("associatedtype Context: Sendable")
                out.line(
                    "/// The error the methods throw, and the one `dispatch` makes for a streaming call without `more`."
                )
                out.line("associatedtype Failure: VarlinkServiceError")
                for method in methods {
                    out.line("")
                    out.documentation(method.documentation)
                    if method.streams {
                        if !method.documentation.isEmpty { out.line("///") }
                        out.line("/// Its replies go to `replies` (`dispatch` refuses a call without `more`).")
                    }
                    out.wrapped("func \(caseName(method.name))(", arguments(method), ")" + result(method))
                }
            }
            out.line("}")
        }
        out.line("}")
        out.line("")
        out.line("extension \(namespace).Service {")
        out.indented { out in
            out.line(
                "/// Answers `call` through the method it names and sends the method's reply, or replies, to `reply`"
            )
            out.line("/// (which returns false once the caller is gone).")
            out.line(
                "/// - Throws: what the method threw; `org.varlink.service.ExpectedMore` for a method that streams"
            )
            out.line("///   called without `more`.")
            out.wrapped(
                "public func dispatch(",
                [
                    "_ call: \(namespace).Call", "more: Bool", "context: Context",
                    "reply: @escaping @Sendable (VarlinkReply) async -> Bool",
                ],
                ") async throws(Failure) {"
            )
            out.indented { out in
                out.line("switch call {")
                for method in methods {
                    let name = caseName(method.name)
                    out.line("case .\(name)(let parameters):")
                    out.indented { out in
                        if method.streams {
                            out.line("guard more else { throw Failure(reply: .expectedMore) }")
                            out.line(
                                "try await \(name)(parameters, context: context, replies: VarlinkReplyStream(reply))"
                            )
                        } else {
                            out.line("let answer = try await \(name)(parameters, context: context)")
                            out.line("_ = await reply(VarlinkReply(answer))")
                        }
                    }
                }
                out.line("}")
            }
            out.line("}")
        }
        out.line("}")
    }

    private func arguments(_ method: (name: String, documentation: [String], streams: Bool)) -> [String] {
        var arguments = ["_ parameters: \(method.name).Parameters", "context: Context"]
        if method.streams { arguments.append("replies: VarlinkReplyStream<\(method.name).Reply>") }
        return arguments
    }

    private func result(_ method: (name: String, documentation: [String], streams: Bool)) -> String {
        method.streams ? " async throws(Failure)" : " async throws(Failure) -> \(method.name).Reply"
    }
}
