import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// The audit log in the systemd journal, against a real systemd-journald (Tests/Journal/journal-sandbox: a
/// private mount namespace, journald as a plain process): deviced sends each audit event as a structured
/// entry through the journal's native protocol, its log lines keep their levels through the `<N>` prefixes,
/// and systemd-journal-upload ships the entries unchanged to a systemd-journal-remote on loopback. Values a
/// worker's identity provider or an app controls (an app's executable path, the keychain group and MSAL client
/// id it names) each stay one field, however many newlines and `NAME=value` lines they hold.
@Suite(.serialized, .tags(.integration, .needsRoot)) struct JournalAuditTests {
    static let journalDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent()
        .appendingPathComponent("Journal")

    /// The entries of a `journalctl -o json` file.
    static func entries(_ file: URL) throws -> [[String: Any]] {
        let text = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
        return try text.split(separator: "\n").map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        }
    }

    @Test func auditEventsAreStructuredJournalEntriesThatJournalUploadShipsUnchanged() async throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "journal-audit-\(UUID().uuidString.prefix(8))"
        )
        let state = scratch.appendingPathComponent("state")
        let out = scratch.appendingPathComponent("out")
        // 0755: the apps' uids reach deviced's socket in `out` and their client under `scratch`.
        for directory in [scratch, out] {
            try FileManager.default.createDirectory(
                at: directory,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o755]
            )
        }
        defer { try? FileManager.default.removeItem(at: scratch) }
        // The worker's name, as the identity provider gives it, tries to inject journal fields of its own: each
        // value with a newline goes in the native protocol's length-prefixed form, so it stays one field.
        let worker = Worker(
            uid: Worker.jo.uid,
            username: "jo.worker@contoso.example\nSHAREDMODE_AUDIT_TYPE=device.deprovisioned\nPRIORITY=0",
            name: "Jo\nMESSAGE=forged"
        )
        let response = scratch.appendingPathComponent("response.json")
        try worker.response().write(to: response)
        // An app's own varlink client, at a path that tries to inject fields too: deviced audits the executable
        // of a refused caller.
        let forged = "\nSHAREDMODE_AUDIT_TYPE=device.deprovisioned\nPRIORITY=0\nMESSAGE=forged"
        let client = scratch.appendingPathComponent("app\(forged)\n").appendingPathComponent("varlink-call")
        try VarlinkCallClient.build(at: client, scratch: scratch)
        let port = 19_600 + Int.random(in: 0..<300)
        let run = try await Command.run(
            Self.journalDirectory.appendingPathComponent("journal-sandbox"),
            [
                Self.journalDirectory.appendingPathComponent("audit-to-journal").path,
                ChildProcess.productsDirectory.path, state.path,
                DevicectlRunner.policy("kiosk.json"), response.path, "com.contoso.kiosk.scanner", out.path, "\(port)",
                client.path,
            ]
        )
        try #require(run.status == 0, "the journal scenario failed (\(run.status)): \(run.stderr)")
        let info = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: out.appendingPathComponent("info.json")))
                as? [String: Any]
        )
        let deviceID = try #require(info["deviceId"] as? String, "\(info)")

        // `journalctl SHAREDMODE_AUDIT_TYPE=account.signed_out` finds the sign-out, with its fields.
        let signedOut = try Self.entries(out.appendingPathComponent("signed-out.json"))
        try #require(signedOut.count == 1, "\(signedOut)")
        let entry = signedOut[0]
        #expect(Self.text(entry["SHAREDMODE_AUDIT_ACCOUNT"]) == worker.username, "\(entry)")
        #expect(entry["SHAREDMODE_AUDIT_REASON"] as? String == "shift-end")
        #expect((entry["SHAREDMODE_AUDIT_SEQUENCE"] as? String).flatMap(Int.init) ?? 0 > 1, "\(entry)")
        #expect((entry["SHAREDMODE_AUDIT_CORRELATION_ID"] as? String)?.isEmpty == false)
        #expect(entry["SHAREDMODE_DEVICE_ID"] as? String == deviceID)
        #expect(entry["SYSLOG_IDENTIFIER"] as? String == "deviced" && entry["PRIORITY"] as? String == "5", "\(entry)")
        #expect(Self.text(entry["MESSAGE"])?.contains("account.signed_out") == true, "\(entry)")
        #expect((entry["SHAREDMODE_AUDIT_DETAILS"] as? String)?.contains("\"scope\":\"global\"") == true, "\(entry)")

        // Every audit event is there once, in order: the provisioning and the key rotation, appended while no daemon
        // ran, too (copied at its next start); and deviced's own log lines keep their level.
        let deviced = try Self.entries(out.appendingPathComponent("deviced.json"))
        let types = deviced.compactMap { $0["SHAREDMODE_AUDIT_TYPE"] as? String }
        #expect(
            types == [
                "device.provisioned", "keychain.access_denied", "keychain.access_denied", "keychain.access_denied",
                "account.signed_in", "account.signed_out", "device.key_rotated",
            ],
            "\(types)"
        )
        #expect(
            !deviced.contains { $0["PRIORITY"] as? String == "0" || Self.text($0["MESSAGE"]) == "forged" },
            "a field was injected"
        )
        let sequences = deviced.compactMap { ($0["SHAREDMODE_AUDIT_SEQUENCE"] as? String).flatMap(Int.init) }
        #expect(sequences == Array(1...7), "\(sequences)")
        try Self.expectAppValuesStayOneField(deviced, out: out, client: client.path, forged: forged)
        let ready = deviced.first { ($0["MESSAGE"] as? String)?.contains("deviced ready") == true }
        #expect(ready?["PRIORITY"] as? String == "6", "\(String(describing: ready))")
        // No token reaches the journal.
        let journalText = try String(contentsOf: out.appendingPathComponent("deviced.json"), encoding: .utf8)
        for secret in worker.secrets() { #expect(!journalText.contains(secret)) }

        // The collector got the same entry through systemd-journal-upload.
        let shipped = try Self.entries(out.appendingPathComponent("remote.json"))
        let upload = (try? String(contentsOf: out.appendingPathComponent("upload.log"), encoding: .utf8)) ?? ""
        try #require(shipped.count == 1, "the collector has \(shipped.count) sign-outs; upload: \(upload)")
        for field in [
            "SHAREDMODE_AUDIT_SEQUENCE", "SHAREDMODE_AUDIT_TYPE", "SHAREDMODE_AUDIT_ACCOUNT",
            "SHAREDMODE_AUDIT_CORRELATION_ID",
            "SHAREDMODE_DEVICE_ID", "MESSAGE", "PRIORITY",
        ] {
            #expect(Self.text(shipped[0][field]) == Self.text(entry[field]), "\(field): \(shipped[0]) vs \(entry)")
        }
    }

    /// The apps' refusals in the journal (Tests/Journal/audit-to-journal): each value the app chose (its
    /// executable's path, the group and the MSAL client id it named) is in the entry's details, whole, and no
    /// entry has a second value of a field (journalctl's JSON gives a field sent twice as an array), a forged
    /// type or a priority other than deviced's 4 for a refusal. A group or MSAL client id with a newline is
    /// refused before any audit.
    static func expectAppValuesStayOneField(
        _ deviced: [[String: Any]],
        out: URL,
        client: String,
        forged: String
    ) throws {
        let replies = try String(contentsOf: out.appendingPathComponent("app-replies.txt"), encoding: .utf8)
            .split(separator: "\n").map { String($0) }
        let errors = replies.map { line in
            let reply = (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]) ?? [:]
            let code = (reply["parameters"] as? [String: Any])?["code"] as? String
            return [reply["error"] as? String, code].compactMap { $0 }.joined(separator: " ")
        }
        #expect(
            errors == [
                "org.sharedmode.Broker1.KeychainError invalidParameter",
                "org.sharedmode.Broker1.KeychainError missingEntitlement",
                "org.sharedmode.Broker1.AccountError msalClientNotAllowed", "org.varlink.service.InvalidParameter",
                "org.sharedmode.Broker1.CallerNotInPolicy",
            ],
            "\(replies)"
        )
        let refusals = deviced.filter { $0["SHAREDMODE_AUDIT_TYPE"] as? String == "keychain.access_denied" }
        let details = refusals.map { entry in
            (entry["SHAREDMODE_AUDIT_DETAILS"] as? String).flatMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: String]
            } ?? [:]
        }
        // The scanner's keychain refusal (its group and executable), its MSAL client id, the stranger's executable.
        #expect(details.map { $0["executable"] } == [client, nil, client], "\(details)")
        #expect(details.map { $0["group"] } == ["com.contoso.kiosk.timeclock", nil, nil], "\(details)")
        #expect(details.dropFirst().first?["msalClientId"] == "SHAREDMODE_AUDIT_TYPE=device.deprovisioned")
        for entry in refusals {
            #expect(entry["PRIORITY"] as? String == "4", "\(entry)")
            #expect(entry["SHAREDMODE_AUDIT_TYPE"] as? String == "keychain.access_denied", "\(entry)")
            #expect(entry["MESSAGE"] is String && entry["SHAREDMODE_AUDIT_DETAILS"] is String, "\(entry)")
            #expect(Self.text(entry["MESSAGE"])?.hasPrefix("audit #") == true, "\(entry)")
        }
        // No entry of any kind carries a value the apps forged as a field of its own.
        for entry in deviced {
            for (name, value) in entry where name.hasPrefix("SHAREDMODE_") || name == "PRIORITY" || name == "MESSAGE" {
                #expect(!(value is [Any]) || value is [Int], "\(name) has several values: \(entry)")
            }
        }
    }

    /// A field of `journalctl -o json`: a string, or (for a value with control characters) an array of bytes.
    static func text(_ value: Any?) -> String? {
        if let string = value as? String { return string }
        guard let bytes = value as? [Int] else { return nil }
        return String(decoding: bytes.map { UInt8(clamping: $0) }, as: UTF8.self)
    }
}
