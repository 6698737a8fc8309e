public import Foundation
import IdentityClient
import KeychainStore
import ProcessSandbox

extension DevicePolicy {
    /// The access group reserved for the device itself (its policy, id and audit signing key); no app
    /// may be entitled to it or to any other `devicectl.` group.
    public static let deviceAccessGroup = AccessGroup.device

    /// Decodes a policy strictly: an unknown key, a wrong type, a duplicate app id, an empty or malformed
    /// access group or an unknown mode is a `PolicyError` naming the JSON path and what is expected; a
    /// document that is not JSON, one naming the line and column of its first syntax error.
    /// A document over `InputLimits.policyDocumentBytes` is refused before it is parsed.
    public static func decode(_ data: Data) throws(PolicyError) -> DevicePolicy {
        guard data.count <= InputLimits.policyDocumentBytes else { throw PolicyError.documentTooLarge }
        let document: JSONValue
        do {
            document = try JSONDecoder().decode(JSONValue.self, from: data)
        } catch {
            guard let location = JSONSyntaxLocation.firstError(in: data) else {
                throw PolicyError(.root, "not valid JSON (\(Self.describe(error)))")
            }
            throw PolicyError(
                .root,
                location.atEnd
                    ? "not valid JSON: the document ends at \(location) before its last object, array or string is closed"
                    : "not valid JSON: a syntax error at \(location) (a missing or extra comma, quote or bracket there or just before it)"
            )
        }
        return try PolicyReader().policy(document)
    }

    /// Reads and decodes a policy file, reading no more than `InputLimits.policyDocumentBytes` of it.
    public static func load(contentsOf url: URL) throws(PolicyError) -> DevicePolicy {
        try decode(try readDocument(url.path))
    }

    /// The bytes of the policy file at `path`, at most `InputLimits.policyDocumentBytes` of them.
    /// - Throws: a `PolicyError` naming the file when it cannot be read or is over the limit.
    public static func readDocument(_ path: String) throws(PolicyError) -> Data {
        let outcome: BoundedInput.Outcome
        do {
            outcome = try BoundedInput.read(contentsOf: path, limit: InputLimits.policyDocumentBytes)
        } catch {
            throw PolicyError(file: path, "cannot read the policy file (\(error))")
        }
        switch outcome {
        case .complete(let data): return data
        case .tooLarge: throw PolicyError(file: path, PolicyError.documentTooLarge.problem)
        }
    }

    private static func describe(_ error: any Error) -> String {
        guard case DecodingError.dataCorrupted(let context) = error else { return "unreadable" }
        return (context.underlyingError as NSError?)?.localizedDescription ?? context.debugDescription
    }
}

/// The strict reader behind `DevicePolicy.decode`.
private struct PolicyReader {
    func policy(_ value: JSONValue) throws(PolicyError) -> DevicePolicy {
        let path = JSONPath.root
        let fields = try object(
            value,
            at: path,
            required: ["version", "device", "authority", "apps"],
            optional: ["id", "session", "audit", "administratorsGroup", "limits", "keyProtection"]
        )
        let version = try integer(fields["version"]!, at: path.key("version"), in: 1...Int.max)
        guard version == DevicePolicy.currentVersion else {
            throw PolicyError(
                path.key("version"),
                "unsupported version \(version); expected \(DevicePolicy.currentVersion)"
            )
        }
        let id = try fields["id"].map { v throws(PolicyError) in try policyID(v, at: path.key("id")) }
        let apps = try apps(fields["apps"]!, at: path.key("apps"))
        return DevicePolicy(
            version: version,
            id: id,
            device: try device(fields["device"]!, at: path.key("device")),
            authority: try authority(fields["authority"]!, at: path.key("authority")),
            apps: apps,
            session: try session(fields["session"], at: path.key("session"), apps: apps),
            audit: try audit(fields["audit"], at: path.key("audit")),
            administratorsGroup: try fields["administratorsGroup"].map { v throws(PolicyError) in
                try unixName(v, at: path.key("administratorsGroup"), what: "group")
            },
            limits: try limits(fields["limits"], at: path.key("limits")),
            keyProtection: try fields["keyProtection"].map { v throws(PolicyError) in
                try keyProtection(v, at: path.key("keyProtection"))
            }
        )
    }

    /// `keyProtection`: `seal` (tpm2, host or tpm2+host) and, for a TPM2, `tpm2Pcrs` (default [7]).
    private func keyProtection(_ value: JSONValue, at path: JSONPath) throws(PolicyError) -> DevicePolicy.KeyProtection
    {
        let fields = try object(value, at: path, required: ["seal"], optional: ["tpm2Pcrs"])
        let name = try string(fields["seal"]!, at: path.key("seal"))
        guard let binding = KeySealing.Binding(rawValue: name) else {
            throw PolicyError(
                path.key("seal"),
                "unknown key \"\(name)\" to seal with; expected \"tpm2\", \"host\" or \"tpm2+host\""
            )
        }
        guard let pcrsValue = fields["tpm2Pcrs"] else { return .init(seal: binding) }
        guard binding.usesTPM else {
            throw PolicyError(
                path.key("tpm2Pcrs"),
                "PCRs bind a TPM2; seal with \"tpm2\" or \"tpm2+host\", or remove tpm2Pcrs"
            )
        }
        let pcrs = try array(pcrsValue, at: path.key("tpm2Pcrs")) { v, at throws(PolicyError) in
            try integer(v, at: at, in: 0...23)
        }
        guard !pcrs.isEmpty else {
            throw PolicyError(
                path.key("tpm2Pcrs"),
                "no PCR; a TPM2 binding names at least one (7, the Secure Boot state, by default): an empty list would never unseal"
            )
        }
        if let duplicate = pcrs.indices.first(where: { pcrs[..<$0].contains(pcrs[$0]) }) {
            throw PolicyError(path.key("tpm2Pcrs").index(duplicate), "PCR \(pcrs[duplicate]) is listed twice")
        }
        return .init(seal: binding, tpm2Pcrs: pcrs.sorted())
    }

    /// A user or group name as the system's databases take them (`[a-z_][a-z0-9_.-]*`, at most 32).
    private func unixName(_ value: JSONValue, at path: JSONPath, what: String) throws(PolicyError) -> String {
        let name = try nonEmptyString(value, at: path)
        guard name.count <= 32, let first = name.first, first.isASCII, first.isLetter || first == "_",
            name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) })
        else {
            throw PolicyError(path, "malformed \(what) name; expected a Unix \(what) name such as kiosk-admins")
        }
        return name
    }

    private func policyID(_ value: JSONValue, at path: JSONPath) throws(PolicyError) -> String {
        let id = try nonEmptyString(value, at: path)
        guard id.count <= 128, id.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) })
        else {
            throw PolicyError(
                path,
                "malformed policy id \"\(id)\"; expected up to 128 letters, digits, '.', '-' or '_' (e.g. contoso-kiosk-2026-11)"
            )
        }
        return id
    }

    private func device(_ value: JSONValue, at path: JSONPath) throws(PolicyError) -> DevicePolicy.Device {
        let fields = try object(value, at: path, required: ["name", "mode"])
        let modeText = try string(fields["mode"]!, at: path.key("mode"))
        guard let mode = DevicePolicy.Mode(rawValue: modeText) else {
            throw PolicyError(path.key("mode"), "unknown mode \"\(modeText)\"; expected \"shared\" or \"private\"")
        }
        return .init(name: try boundedName(fields["name"]!, at: path.key("name"), what: "a device name"), mode: mode)
    }

    private func authority(_ value: JSONValue, at path: JSONPath) throws(PolicyError) -> DevicePolicy.Authority {
        let fields = try object(
            value,
            at: path,
            required: ["issuer", "clientId"],
            optional: ["scopes", "knownAuthorities", "flows", "clientSecret"]
        )
        let scopes =
            try fields["scopes"].map { v throws(PolicyError) in try array(v, at: path.key("scopes"), element: scope) }
            ?? []
        let known =
            try fields["knownAuthorities"].map { v throws(PolicyError) in
                try array(v, at: path.key("knownAuthorities"), element: url)
            } ?? []
        let issuer = try url(fields["issuer"]!, at: path.key("issuer"))
        // The identity client must accept it as an authority (a B2C host must be among the known ones).
        do {
            _ = try Authority(url: issuer, knownAuthorities: known.compactMap(\.host))
        } catch {
            throw PolicyError(path.key("issuer"), error.message)
        }
        return .init(
            issuer: issuer,
            clientId: try nonEmptyString(fields["clientId"]!, at: path.key("clientId")),
            scopes: scopes,
            knownAuthorities: known,
            flows: try fields["flows"].map { v throws(PolicyError) in try flows(v, at: path.key("flows")) }
                ?? DevicePolicy.SignInFlow.defaults,
            clientSecret: try fields["clientSecret"].map { v throws(PolicyError) in
                try clientSecret(v, at: path.key("clientSecret"))
            }
        )
    }

    /// `authority.clientSecret`: 1 to 512 printable characters. The error never repeats the value.
    private func clientSecret(_ value: JSONValue, at path: JSONPath) throws(PolicyError) -> String {
        guard case .string(let text) = value, !text.isEmpty, text.utf8.count <= 512,
            text.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F })
        else {
            throw PolicyError(path, "expected the client secret as a string of 1 to 512 printable characters")
        }
        return text
    }

    /// `authority.flows`: at least one of the flows, each at most once.
    private func flows(_ value: JSONValue, at path: JSONPath) throws(PolicyError) -> [DevicePolicy.SignInFlow] {
        let names = DevicePolicy.SignInFlow.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
        let flows = try array(value, at: path) { (element, position) throws(PolicyError) -> DevicePolicy.SignInFlow in
            let name = try string(element, at: position)
            guard let flow = DevicePolicy.SignInFlow(rawValue: name) else {
                throw PolicyError(position, "unknown sign-in flow \"\(name)\"; expected one of \(names)")
            }
            return flow
        }
        guard !flows.isEmpty else { throw PolicyError(path, "expected at least one sign-in flow (\(names))") }
        for (position, flow) in flows.enumerated() where flows[..<position].contains(flow) {
            throw PolicyError(path.index(position), "\"\(flow.rawValue)\" is listed twice")
        }
        return flows
    }

    private func apps(_ value: JSONValue, at path: JSONPath) throws(PolicyError) -> [DevicePolicy.App] {
        if case .array(let elements) = value, elements.count > InputLimits.apps {
            throw PolicyError(path, "\(elements.count) apps; a policy may list at most \(InputLimits.apps) apps")
        }
        let apps = try array(value, at: path, element: app)
        guard !apps.isEmpty else { throw PolicyError(path, "expected at least one app") }
        var seen: [String: Int] = [:]
        for (position, app) in apps.enumerated() {
            if let first = seen[app.id] {
                throw PolicyError(
                    path.index(position).key("id"),
                    "duplicate app id \"\(app.id)\" (also apps[\(first)]); app ids must be unique"
                )
            }
            seen[app.id] = position
        }
        // One uid is one host app plus its Flatpak apps: the broker tells the apps of one uid apart by their
        // sandbox only, so a uid may have one entry without `flatpak` and each Flatpak id once.
        var hosts: [UInt32: Int] = [:]
        var flatpaks: [String: Int] = [:]
        for (position, app) in apps.enumerated() {
            if let flatpak = app.flatpak {
                let key = "\(app.uid) \(flatpak)"
                if let first = flatpaks[key] {
                    throw PolicyError(
                        path.index(position).key("flatpak"),
                        "Flatpak app \(flatpak) of uid \(app.uid) is also apps[\(first)]; list each sandboxed app once per uid"
                    )
                }
                flatpaks[key] = position
            } else {
                if let first = hosts[app.uid] {
                    throw PolicyError(
                        path.index(position).key(app.user == nil ? "uid" : "user"),
                        "uid \(app.uid) is also apps[\(first)]'s; one uid is one host app (plus Flatpak apps, each named by \"flatpak\"), so give this app a Unix user of its own or its Flatpak app id"
                    )
                }
                hosts[app.uid] = position
            }
        }
        return apps
    }

    private func app(_ value: JSONValue, at path: JSONPath) throws(PolicyError) -> DevicePolicy.App {
        let fields = try object(
            value,
            at: path,
            required: ["id", "accessGroups"],
            optional: ["uid", "user", "flatpak", "msalClientIds"]
        )
        let id = try boundedName(fields["id"]!, at: path.key("id"), what: "an app id")
        guard id.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }) else {
            throw PolicyError(
                path.key("id"),
                "malformed app id \"\(id)\"; expected letters, digits, '.', '-' or '_' (e.g. com.contoso.scanner)"
            )
        }
        let groupsPath = path.key("accessGroups")
        let groups = try array(fields["accessGroups"]!, at: groupsPath, element: accessGroup)
        guard !groups.isEmpty else { throw PolicyError(groupsPath, "expected at least one access group") }
        if let duplicate = groups.indices.first(where: { groups[..<$0].contains(groups[$0]) }) {
            throw PolicyError(groupsPath.index(duplicate), "access group \"\(groups[duplicate])\" is listed twice")
        }
        let uid = try fields["uid"].map { v throws(PolicyError) in
            UInt32(try integer(v, at: path.key("uid"), in: 0...Int(UInt32.max - 1)))
        }
        let user = try fields["user"].map { v throws(PolicyError) in try unixName(v, at: path.key("user"), what: "user")
        }
        let resolved: UInt32
        switch (uid, user) {
        case (nil, nil):
            throw PolicyError(path, "missing key \"uid\" (or \"user\"); name the Unix user the app runs as")
        case (let uid?, nil):
            resolved = uid
        case (let uid, let user?):
            guard let found = UserDatabase.uid(ofUser: user) else {
                throw PolicyError(
                    path.key("user"),
                    "no user \"\(user)\" in the system's user database; create it (useradd --system \(user)) or give \"uid\""
                )
            }
            if let uid, uid != found {
                throw PolicyError(path.key("uid"), "uid \(uid) is not user \(user)'s (\(found)); give one of the two")
            }
            resolved = found
        }
        guard resolved != 0 else {
            throw PolicyError(
                path.key(user == nil ? "uid" : "user"),
                "uid 0 is root, the device's administrator; run the app as a user of its own"
            )
        }
        let clientIDs = try fields["msalClientIds"].map { v throws(PolicyError) in
            try msalClientIDs(v, at: path.key("msalClientIds"))
        }
        let flatpak = try fields["flatpak"].map { v throws(PolicyError) in
            try flatpakAppID(v, at: path.key("flatpak"))
        }
        return .init(
            id: id,
            accessGroups: groups,
            uid: resolved,
            flatpak: flatpak,
            user: user,
            msalClientIds: clientIDs
        )
    }

    /// `apps[].flatpak`: a Flatpak application id (reverse DNS, at least three elements).
    private func flatpakAppID(_ value: JSONValue, at path: JSONPath) throws(PolicyError) -> String {
        let id = try string(value, at: path)
        guard FlatpakAppID.isValid(id) else {
            throw PolicyError(
                path,
                "malformed Flatpak app id \"\(id.prefix(80))\"; expected the app's reverse-DNS id as `flatpak list --app` shows it (at least three elements of letters, digits and '_', '-' in the last only; e.g. com.contoso.Scanner)"
            )
        }
        return id
    }

    /// `apps[].msalClientIds`: at most `InputLimits.msalClientIDsPerApp` distinct client ids, each a bounded
    /// name of letters, digits, '.', '-' and '_' (an Entra application id is a GUID; a local provider's may
    /// be a name).
    private func msalClientIDs(_ value: JSONValue, at path: JSONPath) throws(PolicyError) -> [String] {
        if case .array(let elements) = value, elements.count > InputLimits.msalClientIDsPerApp {
            throw PolicyError(
                path,
                "\(elements.count) client ids; an app may list at most \(InputLimits.msalClientIDsPerApp)"
            )
        }
        let ids = try array(value, at: path) { v, at throws(PolicyError) -> String in
            let id = try boundedName(v, at: at, what: "a client id")
            guard id.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }) else {
                throw PolicyError(
                    at,
                    "malformed client id \"\(id)\"; expected the app registration's application id (a GUID) or letters, digits, '.', '-' and '_'"
                )
            }
            return id
        }
        if let duplicate = ids.indices.first(where: { ids[..<$0].contains(ids[$0]) }) {
            throw PolicyError(path.index(duplicate), "client id \"\(ids[duplicate])\" is listed twice")
        }
        return ids
    }

    private func accessGroup(_ value: JSONValue, at path: JSONPath) throws(PolicyError) -> String {
        let name = try string(value, at: path)
        guard (try? AccessGroup.validate(name)) != nil else {
            throw PolicyError(
                path,
                name.isEmpty
                    ? "empty access group; expected a name like com.microsoft.adalcache"
                    : "malformed access group \"\(name)\"; expected 1-255 letters, digits, '.', '-' or '_' (e.g. com.microsoft.adalcache)"
            )
        }
        guard !AccessGroup.isReserved(name) else {
            throw PolicyError(path, "\(name) is reserved for the device itself; no app may be entitled to it")
        }
        return name
    }

    private func session(
        _ value: JSONValue?,
        at path: JSONPath,
        apps: [DevicePolicy.App]
    ) throws(PolicyError) -> DevicePolicy.Session {
        guard let value else { return .init(idleSignOutSeconds: 0, warningSeconds: 0) }
        let fields = try object(
            value,
            at: path,
            required: [],
            optional: [
                "idleSignOutSeconds", "warningSeconds", "user", "app", "onSignOut", "workerSignedIn", "resetHome",
                "openGraceSeconds", "terminateGraceSeconds",
            ]
        )
        let idle =
            try fields["idleSignOutSeconds"].map { v throws(PolicyError) in
                try integer(v, at: path.key("idleSignOutSeconds"), in: 0...86_400 * 7)
            } ?? 0
        let warning =
            try fields["warningSeconds"].map { v throws(PolicyError) in
                try integer(v, at: path.key("warningSeconds"), in: 0...86_400)
            } ?? 0
        // As Shared iPad's UserSessionTimeout: an idle sign-out sooner than 30 s would sign workers out mid-task.
        if idle > 0 && idle < 30 {
            throw PolicyError(
                path.key("idleSignOutSeconds"),
                "expected 0 (no idle sign-out) or at least 30 seconds, found \(idle)"
            )
        }
        if idle > 0 && warning >= idle {
            throw PolicyError(
                path.key("warningSeconds"),
                "expected fewer warning seconds than idleSignOutSeconds (\(idle))"
            )
        }
        var session = DevicePolicy.Session(idleSignOutSeconds: idle, warningSeconds: warning)
        try loginScreen(fields, at: path, apps: apps, into: &session)
        return session
    }

    /// The login screen's keys of `session`: `user`, `app`, `onSignOut`, `workerSignedIn`, `resetHome`,
    /// `openGraceSeconds`, `terminateGraceSeconds`.
    private func loginScreen(
        _ fields: [String: JSONValue],
        at path: JSONPath,
        apps: [DevicePolicy.App],
        into session: inout DevicePolicy.Session
    ) throws(PolicyError) {
        if let value = fields["user"] {
            let user = try unixName(value, at: path.key("user"), what: "user")
            guard let uid = UserDatabase.uid(ofUser: user) else {
                throw PolicyError(
                    path.key("user"),
                    "no user \"\(user)\" in the system's user database; create the kiosk's local account (useradd --create-home \(user))"
                )
            }
            guard uid != 0 else {
                throw PolicyError(
                    path.key("user"),
                    "\(user) is root; the workers' sessions run as a local account of their own (such as kiosk)"
                )
            }
            // The session's Flatpak apps may run as it (the sandbox tells them apart); a host app may not, or
            // every process of the worker's session would be that app.
            if let app = apps.first(where: { $0.uid == uid && $0.flatpak == nil }) {
                throw PolicyError(
                    path.key("user"),
                    "\(user) (uid \(uid)) is app \(app.id)'s user; the workers' sessions need a local account no host app runs as (its Flatpak apps, named by \"flatpak\", may)"
                )
            }
            session.user = user
            session.userUID = uid
        }
        if let value = fields["app"] {
            let id = try string(value, at: path.key("app"))
            guard apps.contains(where: { $0.id == id }) else {
                throw PolicyError(
                    path.key("app"),
                    "no app \"\(id)\" in apps; name one of: \(apps.map(\.id).joined(separator: ", "))"
                )
            }
            session.app = id
        }
        if let value = fields["onSignOut"] {
            session.onSignOut = try choice(value, at: path.key("onSignOut"), of: DevicePolicy.SessionEndAction.self)
        }
        if let value = fields["workerSignedIn"] {
            session.workerSignedIn = try choice(
                value,
                at: path.key("workerSignedIn"),
                of: DevicePolicy.WorkerSignedIn.self
            )
        }
        if let value = fields["resetHome"] {
            guard case .bool(let flag) = value else {
                throw PolicyError(path.key("resetHome"), "expected true or false, found \(value.kind)")
            }
            session.resetHome = flag
        }
        if let value = fields["openGraceSeconds"] {
            session.openGraceSeconds = try integer(value, at: path.key("openGraceSeconds"), in: 5...3600)
        }
        if let value = fields["terminateGraceSeconds"] {
            session.terminateGraceSeconds = try integer(value, at: path.key("terminateGraceSeconds"), in: 1...300)
        }
    }

    /// One of an enumeration's raw values.
    private func choice<T: RawRepresentable & CaseIterable>(
        _ value: JSONValue,
        at path: JSONPath,
        of type: T.Type
    ) throws(PolicyError) -> T where T.RawValue == String {
        let name = try string(value, at: path)
        guard let found = T(rawValue: name) else {
            let names = T.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
            throw PolicyError(path, "unknown value \"\(name)\"; expected one of \(names)")
        }
        return found
    }

    private func audit(_ value: JSONValue?, at path: JSONPath) throws(PolicyError) -> DevicePolicy.Audit {
        guard let value else { return .init(checkpointInterval: 100) }
        let fields = try object(value, at: path, required: [], optional: ["checkpointInterval"])
        let interval =
            try fields["checkpointInterval"].map { v throws(PolicyError) in
                try integer(v, at: path.key("checkpointInterval"), in: 1...100_000)
            } ?? 100
        return .init(checkpointInterval: interval)
    }

    private func limits(_ value: JSONValue?, at path: JSONPath) throws(PolicyError) -> DevicePolicy.Limits {
        var limits = DevicePolicy.Limits.defaults
        guard let value else { return limits }
        let fields = try object(
            value,
            at: path,
            required: [],
            optional: [
                "connectionsPerApp", "connectionsPerOtherUser", "administratorConnections", "pendingSignInsPerApp",
                "itemsPerApp", "bytesPerApp",
                "passwordFailuresBeforeBackoff", "passwordBackoffSeconds",
            ]
        )
        func read(_ key: String, _ range: ClosedRange<Int>) throws(PolicyError) -> Int? {
            try fields[key].map { v throws(PolicyError) in try integer(v, at: path.key(key), in: range) }
        }
        limits.connectionsPerApp = try read("connectionsPerApp", 1...4096) ?? limits.connectionsPerApp
        limits.connectionsPerOtherUser = try read("connectionsPerOtherUser", 0...4096) ?? limits.connectionsPerOtherUser
        limits.administratorConnections =
            try read("administratorConnections", 1...4096) ?? limits.administratorConnections
        limits.pendingSignInsPerApp = try read("pendingSignInsPerApp", 1...64) ?? limits.pendingSignInsPerApp
        limits.itemsPerApp = try read("itemsPerApp", 1...10_000_000) ?? limits.itemsPerApp
        limits.bytesPerApp = try read("bytesPerApp", 4096...(1 << 40)) ?? limits.bytesPerApp
        limits.passwordFailuresBeforeBackoff =
            try read("passwordFailuresBeforeBackoff", 1...100) ?? limits.passwordFailuresBeforeBackoff
        limits.passwordBackoffSeconds = try read("passwordBackoffSeconds", 1...3600) ?? limits.passwordBackoffSeconds
        return limits
    }

    // MARK: Primitives

    private func object(
        _ value: JSONValue,
        at path: JSONPath,
        required: Set<String>,
        optional: Set<String> = []
    )
        throws(PolicyError) -> [String: JSONValue]
    {
        guard case .object(let fields) = value else {
            throw PolicyError(path, "expected an object, found \(value.kind)")
        }
        for key in fields.keys.sorted() where !required.contains(key) && !optional.contains(key) {
            let allowed = (required.union(optional)).sorted().joined(separator: ", ")
            throw PolicyError(path.key(key), "unknown key; expected one of: \(allowed)")
        }
        for key in required.sorted() where fields[key] == nil {
            throw PolicyError(path.key(key), "missing required key")
        }
        return fields
    }

    private func array<T>(
        _ value: JSONValue,
        at path: JSONPath,
        element: (JSONValue, JSONPath) throws(PolicyError) -> T
    ) throws(PolicyError) -> [T] {
        guard case .array(let values) = value else { throw PolicyError(path, "expected an array, found \(value.kind)") }
        var result: [T] = []
        for (position, item) in values.enumerated() { result.append(try element(item, path.index(position))) }
        return result
    }

    private func string(_ value: JSONValue, at path: JSONPath) throws(PolicyError) -> String {
        guard case .string(let text) = value else { throw PolicyError(path, "expected a string, found \(value.kind)") }
        return text
    }

    /// A non-empty string of at most `InputLimits.nameCharacters` characters (device name, app id).
    private func boundedName(_ value: JSONValue, at path: JSONPath, what: String) throws(PolicyError) -> String {
        let text = try nonEmptyString(value, at: path)
        guard text.count <= InputLimits.nameCharacters else {
            throw PolicyError(
                path,
                "\(what) of \(text.count) characters (\"\(text.prefix(24))…\"); the limit is \(InputLimits.nameCharacters) characters"
            )
        }
        return text
    }

    private func nonEmptyString(_ value: JSONValue, at path: JSONPath) throws(PolicyError) -> String {
        let text = try string(value, at: path)
        guard !text.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw PolicyError(path, "expected a non-empty string")
        }
        return text
    }

    private func scope(_ value: JSONValue, at path: JSONPath) throws(PolicyError) -> String {
        let text = try nonEmptyString(value, at: path)
        guard !text.contains(where: \.isWhitespace) else {
            throw PolicyError(path, "a scope cannot contain spaces; list each scope separately")
        }
        return text
    }

    private func integer(_ value: JSONValue, at path: JSONPath, in range: ClosedRange<Int>) throws(PolicyError) -> Int {
        guard case .number(let number) = value else {
            throw PolicyError(path, "expected an integer, found \(value.kind)")
        }
        guard number.rounded() == number, number >= Double(range.lowerBound), number <= Double(range.upperBound) else {
            throw PolicyError(
                path,
                "expected an integer from \(range.lowerBound) to \(range.upperBound), found \(number)"
            )
        }
        return Int(number)
    }

    private func url(_ value: JSONValue, at path: JSONPath) throws(PolicyError) -> URL {
        let text = try string(value, at: path)
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty
        else {
            throw PolicyError(
                path,
                "expected an absolute URL like https://login.microsoftonline.com/contoso.onmicrosoft.com"
            )
        }
        let loopback = host == "127.0.0.1" || host == "localhost" || host == "::1" || host == "[::1]"
        guard scheme == "https" || (scheme == "http" && loopback) else {
            throw PolicyError(path, "expected an https URL (http is allowed only on loopback for a local provider)")
        }
        return url
    }
}
