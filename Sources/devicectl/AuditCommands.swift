import ArgumentParser
import Foundation
import KeychainStore
import SharedDevice

/// `devicectl audit …`: read and verify the tamper-evident audit log.
struct AuditCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Show the device's audit log (default) or verify it.",
        subcommands: [ShowAudit.self, VerifyAudit.self],
        defaultSubcommand: ShowAudit.self)
}

struct ShowAudit: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Print audit events, oldest first; --jsonl --follow streams new ones for a log shipper.")

    @OptionGroup var store: StoreLocation
    @Option(help: ArgumentHelp("Only events of this type (repeatable), e.g. device.provisioned.", valueName: "type"))
    var type: [String] = []
    @Option(help: ArgumentHelp("Only events at or after this time (ISO 8601, e.g. 2026-11-22T08:00:00Z or 2026-11-22).", valueName: "time"))
    var since: String?
    @Option(help: ArgumentHelp("Only events at or before this time (ISO 8601).", valueName: "time"))
    var until: String?
    @Option(help: ArgumentHelp("Only events about this account.", valueName: "account"))
    var account: String?
    @Flag(help: "Print a JSON array.") var json = false
    @Flag(help: "Print one JSON object per line (JSON Lines).") var jsonl = false
    @Flag(help: "Keep running and print new events as they are appended (Ctrl-C to stop).") var follow = false

    func validate() throws {
        if json && jsonl { throw ValidationError("--json and --jsonl exclude each other") }
        if json && follow { throw ValidationError("--follow streams events; use it with --jsonl or text output, not --json") }
        _ = try parsedTime(since, option: "--since")
        _ = try parsedTime(until, option: "--until")
    }

    func run() throws {
        try runReportingErrors {
            let device = ManagedDevice(store: try store.openExisting(), logger: store.logger)
            var filter = AuditFilter(types: Set(type.map(AuditEventType.init(rawValue:))),
                                     since: try parsedTime(since, option: "--since"),
                                     until: try parsedTime(until, option: "--until"), account: account)
            // Events and the newest sequence number come from one snapshot, so following misses nothing.
            var page = try reportingDeviceErrors { () throws(SharedDeviceError) in try device.auditPage(matching: filter) }
            if json {
                try Output.json(page.events)
                return
            }
            page.events.forEach(show)
            guard follow else { return }
            signal(SIGPIPE, SIG_DFL)
            while true {
                filter.afterSequence = max(filter.afterSequence, page.lastSequence)
                usleep(250_000)
                page = try reportingDeviceErrors { () throws(SharedDeviceError) in try device.auditPage(matching: filter) }
                page.events.forEach(show)
            }
        }
    }

    private func show(_ event: AuditEvent) {
        if jsonl {
            Output.jsonLine(event)
            return
        }
        var line = "#\(event.sequence) \(event.recordedTime) \(event.type) actor=\"\(event.actor)\""
        if let account = event.account { line += " account=\(account)" }
        if let reason = event.reason { line += " reason=\"\(reason)\"" }
        line += " correlation=\(event.correlationID)"
        for (key, value) in event.details.sorted(by: { $0.key < $1.key }) { line += " \(key)=\(value)" }
        Output.print(line)
    }

    private func parsedTime(_ text: String?, option: String) throws -> Date? {
        guard let text else { return nil }
        let styles: [Date.ISO8601FormatStyle] = [
            .init(includingFractionalSeconds: true, timeZone: .gmt), .init(timeZone: .gmt),
            Date.ISO8601FormatStyle(timeZone: .gmt).year().month().day(),
        ]
        for style in styles {
            if let date = try? style.parse(text) { return date }
        }
        throw ValidationError("\(option) \(text) is not an ISO 8601 time; use e.g. 2026-11-22T08:00:00Z or 2026-11-22")
    }
}

struct VerifyAudit: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check the audit log's chain, signed checkpoints and head; exit 46 naming the first bad event.")

    @OptionGroup var store: StoreLocation
    @OptionGroup var output: OutputOptions

    func run() throws {
        try runReportingErrors {
            let device = ManagedDevice(store: try store.openExisting(), logger: store.logger)
            let result = try reportingDeviceErrors { () throws(SharedDeviceError) in try device.verifyAudit() }
            if output.json {
                try Output.json(VerificationJSON(result))
            } else if result.isIntact {
                Output.print("audit log intact: \(result.eventCount) event(s), \(result.checkpointCount) signed checkpoint(s), head #\(result.headSequence) \(result.headChain)")
            } else {
                for problem in result.problems { Output.print("problem: \(problem)") }
            }
            guard result.isIntact else {
                let first = result.firstBadSequence.map { "first bad event: #\($0)" } ?? "the head or tables were altered"
                throw CLIError(exitCode: .integrityFailure,
                    "the audit log was tampered with (\(first)); restore the store from backup and keep this report")
            }
        }
    }

    struct VerificationJSON: Encodable {
        var intact: Bool
        var firstBadSequence: Int64?
        var eventCount: Int
        var checkpointCount: Int
        var headSequence: Int64
        var headChain: String
        var problems: [String]

        init(_ result: AuditVerification) {
            intact = result.isIntact
            firstBadSequence = result.firstBadSequence
            eventCount = result.eventCount
            checkpointCount = result.checkpointCount
            headSequence = result.headSequence
            headChain = result.headChain
            problems = result.problems.map(\.description)
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(intact, forKey: .intact)
            try container.encode(firstBadSequence, forKey: .firstBadSequence)
            try container.encode(eventCount, forKey: .eventCount)
            try container.encode(checkpointCount, forKey: .checkpointCount)
            try container.encode(headSequence, forKey: .headSequence)
            try container.encode(headChain, forKey: .headChain)
            try container.encode(problems, forKey: .problems)
        }

        enum CodingKeys: String, CodingKey {
            case intact, firstBadSequence, eventCount, checkpointCount, headSequence, headChain, problems
        }
    }
}
