import Foundation
import Testing
import VarlinkGenerator

/// `broker-api.md`, the hand-written page about org.sharedmode.Broker1, keeps up with the interface file:
/// its generated regions are what the file generates, every method has its signature there and a place in
/// the table of contents, and every error is in the error table. (The page's recorded exchanges are
/// replayed against a live broker by `BrokerAPIPageReplayTests`.)
@Suite struct APIPageTests {
    static let interfacePath = "Sources/BrokerContract/org.sharedmode.Broker1.varlink"
    static let pagePath = "Sources/BrokerContract/broker-api.md"
    static let regenerate = "swift run varlink-generate --markdown \(interfacePath) \(pagePath)"

    static func interface() throws -> VarlinkInterfaceDefinition {
        try VarlinkInterfaceDefinition(
            parsing: String(
                contentsOf: ContractGenerationTests.root.appendingPathComponent(interfacePath),
                encoding: .utf8
            )
        )
    }

    static func page() throws -> String {
        try String(contentsOf: ContractGenerationTests.root.appendingPathComponent(pagePath), encoding: .utf8)
    }

    static func names(_ interface: VarlinkInterfaceDefinition) -> (methods: [String], types: [String], errors: [String])
    {
        var names: (methods: [String], types: [String], errors: [String]) = ([], [], [])
        for member in interface.members {
            switch member {
            case .method(let name, _, _, _, _): names.methods.append(name)
            case .type(let name, _, _): names.types.append(name)
            case .error(let name, _, _): names.errors.append(name)
            }
        }
        return names
    }

    @Test func thePagesGeneratedRegionsAreWhatTheInterfaceGenerates() throws {
        let page = try Self.page()
        let fresh = try MarkdownSignatureGenerator(interface: Self.interface()).rewrite(page)
        let firstDifference = zip(
            page.split(separator: "\n", omittingEmptySubsequences: false),
            fresh.split(separator: "\n", omittingEmptySubsequences: false)
        ).enumerated().first { $0.element.0 != $0.element.1 }
        let unchanged = page == fresh
        #expect(
            unchanged,
            """
            \(Self.pagePath)'s generated regions differ from what \(Self.interfacePath) generates\
            \(firstDifference.map { " (first at line \($0.offset + 1): \"\($0.element.0)\" vs \"\($0.element.1)\")" } ?? ""); run `\(Self.regenerate)`
            """
        )
    }

    @Test func everyMethodAndTypeHasItsGeneratedSignatureOnThePage() throws {
        let regions = MarkdownSignatureGenerator.regions(in: try Self.page())
        let (methods, types, _) = Self.names(try Self.interface())
        #expect(methods.count == 27)
        for method in methods {
            #expect(
                regions.filter { $0 == "method \(method)" }.count == 1,
                "the page needs one `<!-- generated: method \(method) -->` region, then `\(Self.regenerate)`"
            )
        }
        for type in types {
            #expect(regions.contains("type \(type)"), "the page shows no `<!-- generated: type \(type) -->` region")
        }
        #expect(regions.contains("errors"), "the page shows no `<!-- generated: errors -->` region")
    }

    /// The table of contents: the bullet list before the first section.
    static func tableOfContents(_ page: String) -> String {
        let start = page.range(of: "\n- [")?.lowerBound ?? page.startIndex
        let end = page.range(of: "\n\n", range: start..<page.endIndex)?.lowerBound ?? page.endIndex
        return String(page[start..<end])
    }

    /// The rows of the Markdown table whose header starts with `header`.
    static func table(startingWith header: String, in page: String) -> [String] {
        let lines = page.split(separator: "\n").map(String.init)
        guard let start = lines.firstIndex(where: { $0.hasPrefix(header) }) else { return [] }
        return Array(lines[(start + 2)...].prefix { $0.hasPrefix("|") })
    }

    @Test func theTableOfContentsNamesEveryMethodAndLinksToItsSection() throws {
        let page = try Self.page()
        let contents = Self.tableOfContents(page)
        let headings = Set(
            page.split(separator: "\n").filter { $0.hasPrefix("#") }.map { line in
                // GitHub's anchors: lowercase, punctuation but `-` dropped, spaces as `-`.
                "#"
                    + line.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces).lowercased()
                    .filter { $0.isLetter || $0.isNumber || $0 == " " || $0 == "-" }.replacingOccurrences(
                        of: " ",
                        with: "-"
                    )
            }
        )
        for method in Self.names(try Self.interface()).methods {
            #expect(contents.contains("`\(method)`"), "the table of contents does not name \(method)")
        }
        for link in contents.split(separator: "(").dropFirst().compactMap({ $0.split(separator: ")").first })
        where link.hasPrefix("#") {
            #expect(headings.contains(String(link)), "the table of contents links to \(link), which is no heading")
        }
    }

    @Test func theErrorTableHasEveryErrorOfTheInterface() throws {
        let page = try Self.page()
        let rows = Self.table(startingWith: "| error |", in: page)
        let interface = try Self.interface()
        let named = Set(rows.compactMap { $0.split(separator: "`").dropFirst().first.map(String.init) })
        for error in Self.names(interface).errors {
            #expect(
                named.contains("\(interface.name).\(error)"),
                "the error table has no row for \(interface.name).\(error)"
            )
        }
        for error in [
            "InterfaceNotFound", "MethodNotFound", "MethodNotImplemented", "InvalidParameter", "PermissionDenied",
            "ExpectedMore",
        ] {
            #expect(
                named.contains("org.varlink.service.\(error)"),
                "the error table has no row for org.varlink.service.\(error)"
            )
        }
    }

    /// The limits table names each limit the broker enforces, with the value it enforces by default.
    @Test(arguments: [
        ("message size", "1 MiB"), ("values per message", "1024"), ("time to complete a message", "10 s"),
        ("idle connection", "60 s"),
        ("calls queued", "64"), ("bytes of calls queued on one connection", "4 MiB"),
        ("over all the connections of one uid", "16 MiB"),
        ("over every caller's connections", "48 MiB"), ("over every caller's connections", "256 KiB"),
        ("a reply not read", "30 s"),
        ("replies unread by one uid", "8 MiB"), ("reply size", "4 MiB"), ("connections served at once", "256"),
        ("connections kept for root", "16"), ("connections per app", "16"),
        ("connections per uid the policy does not list", "2"),
        ("interactive sign-ins pending per app", "2"), ("browser sign-ins pending over every app", "16"),
        ("keychain items per app", "1000"), ("bytes of an app's items", "8 MiB"),
        ("failed password sign-ins", "3"), ("the first back-off", "30 s"), ("password sign-ins at once", "1"),
        ("a native sign-in waiting", "10 minutes"),
    ])
    func theLimitsTableNamesEveryLimitWithItsValue(limit: String, value: String) throws {
        let rows = Self.table(startingWith: "| limit |", in: try Self.page())
        let row = rows.first { $0.hasPrefix("| \(limit)") || $0.hasPrefix("| … \(limit)") }
        #expect(
            row?.split(separator: "|").dropFirst().first?.contains(value) == true,
            "the limits table's row for \(limit) does not say \(value): \(row ?? "missing")"
        )
    }

    /// `varlink-generate --markdown` as a user runs it: `--check` fails on a page whose region is stale and
    /// writes nothing; without it the page is rewritten to what the checked-in page is.
    @Test func theCommandChecksAndRewritesAStalePage() throws {
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("varlink-generate")
        try #require(
            FileManager.default.isExecutableFile(atPath: executable.path),
            "build the package first: \(executable.path) is missing"
        )
        let page = try Self.page()
        let stale = page.replacingOccurrences(
            of: "method GetAccounts() -> (accounts: []Account)",
            with: "method GetAccounts() -> ()"
        )
        try #require(stale != page)
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("broker-api-\(UUID().uuidString).md")
        try stale.write(to: copy, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: copy) }
        func run(_ arguments: [String]) throws -> Int32 {
            let process = Process()
            process.executableURL = executable
            process.arguments = arguments
            process.standardError = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            return process.terminationStatus
        }
        let interface = ContractGenerationTests.root.appendingPathComponent(Self.interfacePath).path
        #expect(try run(["--markdown", interface, copy.path, "--check"]) == 1)
        #expect(try String(contentsOf: copy, encoding: .utf8) == stale)
        #expect(try run(["--markdown", interface, copy.path]) == 0)
        let rewritten = try String(contentsOf: copy, encoding: .utf8)
        #expect(rewritten == page, "the command's rewrite differs from the checked-in page")
        #expect(try run(["--markdown", interface, copy.path, "--check"]) == 0)
    }

    @Test func aRegionThatNamesNoMemberOrIsNotClosedIsAnErrorNamingItsLine() throws {
        let generator = MarkdownSignatureGenerator(interface: try Self.interface())
        #expect {
            _ = try generator.rewrite("text\n<!-- generated: method Nope -->\n<!-- end generated -->\n")
        } throws: { ($0 as? VarlinkIDLError)?.line == 2 }
        #expect {
            _ = try generator.rewrite("<!-- generated: method GetCaller -->\ntext\n")
        } throws: { ($0 as? VarlinkIDLError)?.line == 1 }
        // Outside the regions nothing changes; inside, the declaration as a varlink block.
        let rewritten = try generator.rewrite(
            "a\n<!-- generated: method GetAccounts -->\nstale\n<!-- end generated -->\nb"
        )
        #expect(
            rewritten
                == "a\n<!-- generated: method GetAccounts -->\n```varlink\nmethod GetAccounts() -> (accounts: []Account)\n```\n<!-- end generated -->\nb"
        )
    }
}
