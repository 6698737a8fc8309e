public import BrokerContract
import Foundation
import SharedDevice
public import Varlink

// Account changes pushed to every subscribed app (MSAL Android's CURRENT_ACCOUNT_CHANGED broadcast).
extension Broker {
    /// Streams an `AccountEvent` for every account change until the caller goes away; the first reply
    /// (`subscribed`) says the subscription is live and gives the current account.
    public func subscribeAccountChanges(
        _ parameters: Broker1.SubscribeAccountChanges.Parameters,
        context caller: BrokerCaller,
        replies: VarlinkReplyStream<Broker1.SubscribeAccountChanges.Reply>
    ) async throws(BrokerFailure) {
        let application = try application(for: caller)
        // Subscribe before reading the state, so no change falls in between.
        let changes = events.subscribe()
        let sequence = (try? device.lastAuditSequence()) ?? 0
        guard
            await replies.next(try event(kind: .subscribed, reason: nil, sequence: sequence, application: application))
        else { return }
        var lastSequence = sequence
        for await brokerEvent in changes {
            let delivered =
                switch brokerEvent {
                case .account(let change):
                    await replies.next(
                        try event(
                            kind: Self.kindName(change.kind),
                            reason: change.reason?.rawValue,
                            sequence: change.sequence,
                            application: application
                        )
                    )
                case .idleWarning(let secondsLeft):
                    await replies.next(
                        try event(
                            kind: .idleWarning,
                            reason: nil,
                            sequence: lastSequence,
                            secondsLeft: secondsLeft,
                            application: application
                        )
                    )
                case .idleWarningCanceled:
                    await replies.next(
                        try event(
                            kind: .idleWarningCanceled,
                            reason: nil,
                            sequence: lastSequence,
                            application: application
                        )
                    )
                }
            guard delivered else { return }
            if case .account(let change) = brokerEvent { lastSequence = max(lastSequence, change.sequence) }
        }
    }

    private static func kindName(_ kind: AccountChange.Kind) -> Broker1.AccountEventKind {
        switch kind {
        case .signedIn: .signedIn
        case .signedOutGlobally: .signedOut
        case .switched: .switched
        case .deviceModeChanged: .deviceModeChanged
        }
    }

    private func event(
        kind: Broker1.AccountEventKind,
        reason: String?,
        sequence: Int64,
        secondsLeft: Int? = nil,
        application: ApplicationEngine
    ) throws(BrokerFailure) -> Broker1.SubscribeAccountChanges.Reply {
        let current: DeviceAccount?
        do {
            current = try application.currentAccount().current
        } catch {
            throw BrokerFailure(error)
        }
        return Broker1.SubscribeAccountChanges.Reply(
            event: Broker1.AccountEvent(
                kind: kind,
                current: current.map(Broker1.Account.init),
                reason: reason,
                mode: Broker1.DeviceMode(device.information().information.mode),
                sequence: Int(sequence),
                secondsLeft: secondsLeft
            )
        )
    }
}
