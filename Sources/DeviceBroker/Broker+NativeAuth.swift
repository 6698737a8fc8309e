public import BrokerContract
import Foundation
import IdentityClient
import SharedDevice
import Varlink

// Native authentication through the broker: StartNativeSignIn, ResendNativeSignInCode, SubmitNativeSignIn.
extension Broker {
    /// Starts a native sign-in: what the worker must give next.
    public func startNativeSignIn(
        _ parameters: Broker1.StartNativeSignIn.Parameters,
        context caller: BrokerCaller
    ) async throws(BrokerFailure)
        -> Broker1.StartNativeSignIn.Reply
    {
        let application = try application(
            for: caller,
            msalClientID: parameters.msalClientId,
            method: "StartNativeSignIn"
        )
        let username = try ParameterCheck.username(parameters.username)
        let switchReason = try parameters.switchReason.map { reason throws(BrokerFailure) in
            try ParameterCheck.reason(reason, default: .shiftEnd, allowed: [.shiftEnd, .user])
        }
        let maximum = limits.pendingSignInsPerApp
        let uidMaximum = uidShare(of: maximum, uid: caller.uid)
        let open = nativeSignIns.openCount(owner: caller.appKey, uid: caller.uid)
        guard open.app < maximum, open.uid < uidMaximum else {
            throw Self.tooManyNativeSignIns(caller, maximum: maximum)
        }
        let step: NativeSignInStep
        var shift: AccountManager.ShiftSwitch?
        do {
            if let switchReason {
                (step, shift) = try await application.startNativeSwitch(username: username, reason: switchReason)
            } else {
                step = try await application.startNativeSignIn(username: username)
            }
        } catch {
            throw BrokerFailure(error)
        }
        let signedOut = shift.map { shift in
            Broker1.SignedOutWorker(
                account: shift.signedOut?.account.map(Broker1.Account.init),
                itemsRemoved: shift.signedOut?.itemsRemoved ?? 0
            )
        }
        guard
            let id = nativeSignIns.open(
                step,
                owner: caller.appKey,
                uid: caller.uid,
                msalClientID: parameters.msalClientId,
                shift: shift,
                maximum: maximum,
                uidMaximum: uidMaximum
            )
        else {
            throw Self.tooManyNativeSignIns(caller, maximum: maximum)
        }
        return Broker1.StartNativeSignIn.Reply(next: Self.challenge(step, id: id), signedOut: signedOut)
    }

    private static func tooManyNativeSignIns(_ caller: BrokerCaller, maximum: Int) -> BrokerFailure {
        .limitExceeded(
            .pendingSignInsPerApp,
            maximum: maximum,
            "\(caller.actor) already has \(maximum) sign-ins open (the policy's limits.pendingSignInsPerApp, for each app of its uid); finish one or wait 10 minutes"
        )
    }

    /// Sends a native sign-in's one-time code again.
    public func resendNativeSignInCode(
        _ parameters: Broker1.ResendNativeSignInCode.Parameters,
        context caller: BrokerCaller
    ) async throws(BrokerFailure)
        -> Broker1.ResendNativeSignInCode.Reply
    {
        let application = try application(for: caller)
        let entry = try openSignIn(parameters.signInId, caller: caller)
        do {
            let step = try await application.resendNativeSignInCode(entry.step)
            nativeSignIns.update(parameters.signInId, step: step)
            return Broker1.ResendNativeSignInCode.Reply(next: Self.challenge(step, id: parameters.signInId))
        } catch {
            if error.identityError?.code != .unsupported { nativeSignIns.close(parameters.signInId) }
            throw BrokerFailure(error)
        }
    }

    /// Finishes a native sign-in with the password or the code.
    public func submitNativeSignIn(
        _ parameters: Broker1.SubmitNativeSignIn.Parameters,
        context caller: BrokerCaller
    ) async throws(BrokerFailure)
        -> Broker1.SubmitNativeSignIn.Reply
    {
        let application = try application(for: caller)
        let entry = try openSignIn(parameters.signInId, caller: caller)
        let credential: ApplicationEngine.NativeSignInCredential
        switch (parameters.password, parameters.code, entry.step.challenge) {
        case (let password?, nil, .password) where !password.isEmpty && password.utf8.count <= 1024:
            credential = .password(password)
        case (nil, let code?, .code) where !code.isEmpty && code.count <= 64: credential = .code(code)
        case (_, _, .password): throw .invalidParameter("password")
        case (_, _, .code): throw .invalidParameter("code")
        }
        do {
            let result = try await withPasswordThrottle(
                caller,
                username: entry.step.username,
                method: "SubmitNativeSignIn"
            ) { () async throws(SharedDeviceError) in
                try await application.completeNativeSignIn(
                    entry.step,
                    credential: credential,
                    scopes: parameters.scopes,
                    msalClientID: entry.msalClientID,
                    shift: entry.shift
                )
            }
            nativeSignIns.close(parameters.signInId)
            return Broker1.SubmitNativeSignIn.Reply(result: try Self.result(result, msalClientID: entry.msalClientID))
        } catch {
            // A wrong code leaves the sign-in open (type it again, or resend); a held-back attempt too.
            let retryable =
                error.reply.parameters["identityCode"]?.string == IdentityError.Code.invalidCode.rawValue
                || error.reply.error == Broker1.LimitExceeded.qualifiedName
            if !retryable { nativeSignIns.close(parameters.signInId) }
            throw error
        }
    }

    private func openSignIn(_ id: String, caller: BrokerCaller) throws(BrokerFailure) -> NativeSignIns.Entry {
        guard let entry = nativeSignIns.entry(id, owner: caller.appKey) else {
            throw BrokerFailure(
                Broker1.AccountError(
                    code: "signInNotFound",
                    message:
                        "no native sign-in with that id is open for this app (it finished, failed, or waited more than 10 minutes); start again",
                    msalStatus: nil,
                    identityCode: nil
                )
            )
        }
        return entry
    }

    private static func challenge(_ step: NativeSignInStep, id: String) -> Broker1.NativeSignInChallenge {
        switch step.challenge {
        case .password:
            Broker1.NativeSignInChallenge(signInId: id, challenge: .password)
        case .code(let length, let sentTo, let channel):
            Broker1.NativeSignInChallenge(
                signInId: id,
                challenge: .code,
                codeLength: length,
                sentTo: sentTo,
                channel: channel
            )
        }
    }
}
