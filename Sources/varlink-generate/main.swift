import Foundation
import VarlinkGenerator

// varlink-generate INTERFACE.varlink OUTPUT.swift [--namespace NAME] [--check]
// varlink-generate --markdown INTERFACE.varlink PAGE.md [--check]
// Writes the Swift contract of a varlink interface (see SwiftContractGenerator), or with --markdown
// rewrites the generated regions of a hand-written page about it (see MarkdownSignatureGenerator). With
// --check, writes nothing and exits 1 when OUTPUT differs from what would be written.

var arguments = Array(CommandLine.arguments.dropFirst())
let check = arguments.contains("--check")
let markdown = arguments.contains("--markdown")
arguments.removeAll { $0 == "--check" || $0 == "--markdown" }
var namespace: String?
if let index = arguments.firstIndex(of: "--namespace"), index + 1 < arguments.count {
    namespace = arguments[index + 1]
    arguments.removeSubrange(index...index + 1)
}
guard arguments.count == 2 else {
    FileHandle.standardError.write(
        Data(
            """
            usage: varlink-generate INTERFACE.varlink OUTPUT.swift [--namespace NAME] [--check]
                   varlink-generate --markdown INTERFACE.varlink PAGE.md [--check]

            """.utf8
        )
    )
    exit(64)
}
let (input, output) = (arguments[0], arguments[1])
do {
    let text = try String(contentsOfFile: input, encoding: .utf8)
    let interface = try VarlinkInterfaceDefinition(parsing: text)
    if markdown {
        let page = try String(contentsOfFile: output, encoding: .utf8)
        let rewritten: String
        do {
            rewritten = try MarkdownSignatureGenerator(interface: interface).rewrite(page)
        } catch {
            FileHandle.standardError.write(Data("\(output): \(error)\n".utf8))
            exit(65)
        }
        if check {
            guard rewritten == page else {
                FileHandle.standardError.write(
                    Data(
                        "\(output)'s generated regions are not what \(input) generates; run without --check to regenerate them\n"
                            .utf8
                    )
                )
                exit(1)
            }
        } else if rewritten != page {
            try rewritten.write(toFile: output, atomically: true, encoding: .utf8)
        }
        exit(0)
    }
    let generator = SwiftContractGenerator(
        interface: interface,
        namespace: namespace,
        sourceName: URL(fileURLWithPath: input).lastPathComponent,
        regenerateCommand:
            "swift run varlink-generate \(input) \(output)\(namespace.map { " --namespace \($0)" } ?? "")"
    )
    let source = try generator.source()
    if check {
        let existing = try? String(contentsOfFile: output, encoding: .utf8)
        guard existing == source else {
            FileHandle.standardError.write(
                Data("\(output) is not what \(input) generates; run without --check to regenerate it\n".utf8)
            )
            exit(1)
        }
    } else {
        try source.write(toFile: output, atomically: true, encoding: .utf8)
    }
} catch let error as VarlinkIDLError {
    FileHandle.standardError.write(Data("\(input): \(error)\n".utf8))
    exit(65)
} catch {
    FileHandle.standardError.write(Data("varlink-generate: \(error)\n".utf8))
    exit(74)
}
