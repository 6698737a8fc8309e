import Logging
import MSALBridge
import SharedDeviceClient

/// Follows the broker's account changes: when the worker is signed out (or switched), and when the
/// bridge starts with nobody signed in, it deletes MSALRuntime's items (schema
/// `com.microsoft.identity.secret`) from the user's Secret Service, so no MSAL app finds the worker's
/// account or tokens there. Reconnects with a back-off while the broker is away.
struct SignOutWatcher: Sendable {
    static let schema = "com.microsoft.identity.secret"

    let application: PublicClientApplication
    let bus: SessionBus
    let logger: Logger

    func run() async {
        var delay = Duration.seconds(1)
        while !Task.isCancelled {
            do {
                for try await event in application.accountChanges() {
                    delay = .seconds(1)
                    switch event {
                    case .subscribed(let current, _) where current == nil:
                        await clear(because: "nobody is signed in")
                    case .signedOut(let reason, _):
                        await clear(because: "the worker was signed out (\(reason?.rawValue ?? "user"))")
                    case .switched:
                        await clear(because: "the shift changed")
                    default:
                        break
                    }
                }
            } catch {
                logger.debug("the account-change subscription ended; retrying", metadata: ["error": "\(error)"])
            }
            try? await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(30))
        }
    }

    private func clear(because reason: String) async {
        do {
            let deleted = try await bus.deleteSecretItems(schema: Self.schema)
            logger.info("\(reason): deleted \(deleted) MSAL item(s) from the Secret Service")
        } catch {
            logger.warning("\(reason), but MSAL's items could not be deleted from the Secret Service: \(error)")
        }
    }
}
