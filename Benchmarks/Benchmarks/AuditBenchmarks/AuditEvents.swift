import SharedDevice

/// Realistic audit entries: the account manager's sign-outs at the end of a shift on a kiosk.
enum AuditEvents {
    static let actor = "com.contoso.kiosk.timeclock"
    private static let triggers = ["timeclock", "idle-timer", "badge-tap"]

    /// The `index`th entry (its correlation id is a fresh UUID).
    static func entry(_ index: Int) -> AuditEntry {
        AuditEntry(
            type: AuditEventType("account.signed_out"),
            actor: actor,
            account: "worker\(index % 50 + 1)@contoso.com",
            reason: "shift-end",
            details: [
                "sessionSeconds": "\(28_000 + index % 900)", "itemsRemoved": "\(index % 4 + 2)",
                "trigger": triggers[index % triggers.count],
            ]
        )
    }
}
