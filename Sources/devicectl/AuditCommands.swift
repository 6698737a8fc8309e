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
        defaultSubcommand: ShowAudit.self
    )
}

struct ShowAudit: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Print audit events, oldest first; --jsonl --follow streams new ones for a log shipper."
    )

    @OptionGroup var store: StoreLocation
    @Option(help: ArgumentHelp("Only events of this type (repeatable), e.g. device.provisioned.", valueName: "type"))
    var type: [String] = []
    @Option(
        help: ArgumentHelp(
            "Only events at or after this time (ISO 8601, e.g. 2026-11-22T08:00:00Z or 2026-11-22).",
            valueName: "time"
        )
    )
    var since: String?
    @Option(help: ArgumentHelp("Only events at or before this time (ISO 8601).", valueName: "time"))
    var until: String?
    @Option(help: ArgumentHelp("Only events about this account.", valueName: "account"))
    var account: String?
    @Flag(help: "Print a JSON array.") var json = false
    @Flag(help: "Print one JSON object per line (JSON Lines).") var jsonl = false
    @Flag(help: "Keep running and print new events as they are appended (Ctrl-C to stop).") var follow = false
    @Option(
        help: ArgumentHelp(
            "Start after the sequence number kept in this file, and keep the last one printed there.",
            discussion: "For a forwarder that restarts (journalctl's --cursor-file): nothing twice, nothing lost.",
            valueName: "file"
        )
    )
    var cursorFile: String?

    func validate() throws {
        if json && jsonl { throw ValidationError("--json and --jsonl exclude each other") }
        if json && follow {
            throw ValidationError("--follow streams events; use it with --jsonl or text output, not --json")
        }
        _ = try parsedTime(since, option: "--since")
        _ = try parsedTime(until, option: "--until")
    }

    func run() throws {
        try runReportingErrors {
            let device = ManagedDevice(store: try store.openExisting(), logger: store.logger)
            var filter = AuditFilter(
                types: Set(type.map(AuditEventType.init(rawValue:))),
                since: try parsedTime(since, option: "--since"),
                until: try parsedTime(until, option: "--until"),
                account: account
            )
            let cursor = cursorFile.map { AuditCursor(path: $0) }
            if let cursor { filter.afterSequence = try cursor.read() }
            // Events and the newest sequence number come from one snapshot, so following misses nothing.
            var page = try reportingDeviceErrors { () throws(SharedDeviceError) in
                try device.auditPage(matching: filter)
            }
            if json {
                try Output.json(page.events)
                try cursor?.write(page.events.last?.sequence)
                return
            }
            try emit(page.events, cursor: cursor)
            guard follow else { return }
            signal(SIGPIPE, SIG_DFL)
            // Woken by inotify on every write to the store's files (any process's commit), with a
            // look every second in case a wake-up was lost.
            let watcher = try? ChangeSignal.watchWrites(in: store.directory)
            var writesPending = false
            while true {
                filter.afterSequence = max(filter.afterSequence, page.lastSequence)
                let woke =
                    writesPending
                    || (watcher?.wait(timeout: .seconds(1))
                        ?? {
                            usleep(250_000)
                            return false
                        }())
                writesPending = false
                page = try reportingDeviceErrors { () throws(SharedDeviceError) in
                    try device.auditPage(matching: filter)
                }
                try emit(page.events, cursor: cursor)
                // A commit becomes visible just after its last write: if the wake-up came early, look again
                // 1, 2, 4, 8 and 16 ms later (at once if more writes come).
                var delay = 1
                while woke, page.events.isEmpty, let watcher, delay <= 16 {
                    writesPending = watcher.wait(timeout: .milliseconds(delay))
                    if writesPending { break }
                    page = try reportingDeviceErrors { () throws(SharedDeviceError) in
                        try device.auditPage(matching: filter)
                    }
                    try emit(page.events, cursor: cursor)
                    delay *= 2
                }
            }
        }
    }

    /// Prints `events` and keeps the last one's sequence in the cursor file. With a cursor, SIGTERM, SIGINT
    /// and SIGHUP wait until both are done, so a forwarder stopped by systemd sends nothing twice (after a
    /// SIGKILL or a crash, at most the last batch comes again; the sequence numbers tell).
    private func emit(_ events: [AuditEvent], cursor: AuditCursor?) throws {
        guard let cursor, !events.isEmpty else {
            events.forEach(show)
            return
        }
        var stops = sigset_t()
        var previous = sigset_t()
        sigemptyset(&stops)
        for stop in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&stops, stop) }
        pthread_sigmask(SIG_BLOCK, &stops, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        events.forEach(show)
        try cursor.write(events.last?.sequence)
    }

    private func show(_ event: AuditEvent) {
        if jsonl {
            Output.jsonLine(event)
            return
        }
        // Every value came from somewhere an attacker may reach (an executable path, a label, a name): escaped.
        var line =
            "#\(event.sequence) \(event.recordedTime) \(event.type.rawValue.forTerminal) actor=\"\(event.actor.forTerminal)\""
        if let account = event.account { line += " account=\(account.forTerminal)" }
        if let reason = event.reason { line += " reason=\"\(reason.forTerminal)\"" }
        line += " correlation=\(event.correlationID.forTerminal)"
        for (key, value) in event.details.sorted(by: { $0.key < $1.key }) {
            line += " \(key.forTerminal)=\(value.forTerminal)"
        }
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

/// The last audit sequence number a forwarder printed, in a file of its own (a decimal number).
struct AuditCursor {
    let path: String

    /// The sequence to start after (0 when the file does not exist yet).
    func read() throws -> Int64 {
        guard FileManager.default.fileExists(atPath: path) else { return 0 }
        let outcome: BoundedInput.Outcome
        do {
            outcome = try BoundedInput.read(contentsOf: path, limit: 64)
        } catch {
            throw CLIError(exitCode: .ioError, "cannot read the cursor file \(path): \(error)")
        }
        guard case .complete(let data) = outcome,
            let sequence = Int64(String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)),
            sequence >= 0
        else {
            throw CLIError(
                exitCode: .badInput,
                "the cursor file \(path) holds no sequence number; remove it to start from the first event"
            )
        }
        return sequence
    }

    /// Keeps `sequence` (written to a new file renamed over the old, so a crash leaves the old or the new).
    func write(_ sequence: Int64?) throws {
        guard let sequence else { return }
        do {
            try Data("\(sequence)\n".utf8).write(to: URL(fileURLWithPath: path), options: [.atomic])
        } catch {
            throw CLIError(exitCode: .ioError, "cannot write the cursor file \(path): \(error.localizedDescription)")
        }
    }
}

struct VerifyAudit: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check the audit log's chain, signed checkpoints and head; exit 46 naming the first bad event."
    )

    @OptionGroup var store: StoreLocation
    @OptionGroup var output: OutputOptions

    func run() throws {
        try runReportingErrors {
            let device = ManagedDevice(store: try store.openExisting(), logger: store.logger)
            let result = try reportingDeviceErrors { () throws(SharedDeviceError) in try device.verifyAudit() }
            if output.json {
                try Output.json(VerificationJSON(result))
            } else if result.isIntact {
                Output.print(
                    "audit log intact: \(result.eventCount) event(s), \(result.checkpointCount) signed checkpoint(s), head #\(result.headSequence) \(result.headChain)"
                )
            } else {
                for problem in result.problems { Output.print("problem: \(problem)") }
            }
            guard result.isIntact else {
                let first =
                    result.firstBadSequence.map { "first bad event: #\($0)" } ?? "the head or tables were altered"
                throw CLIError(
                    exitCode: .integrityFailure,
                    "the audit log was tampered with (\(first)); restore the store from backup and keep this report"
                )
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
