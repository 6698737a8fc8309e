import SharedDeviceClient
import Testing

/// A sign-out event's reason: the broker's four words and any other, kept.
struct SignedOutReasonTests {
    @Test func theBrokersWordsBecomeCasesAndComeBackUnchanged() {
        let words = ["user": SignedOutReason.user, "shift-end": .shiftEnd, "admin": .admin, "idle": .idle]
        for (word, reason) in words {
            #expect(SignedOutReason(rawValue: word) == reason)
            #expect(reason.rawValue == word)
        }
    }

    @Test func aReasonThisClientDoesNotKnowIsKeptAsTheBrokerSpelledIt() {
        let reason = SignedOutReason(rawValue: "deprovisioned")
        #expect(reason == .other("deprovisioned") && reason.rawValue == "deprovisioned")
        #expect("\(reason)" == "signed out (deprovisioned)")
    }

    @Test func theDescriptionIsForAPerson() {
        #expect("\(SignedOutReason.shiftEnd)" == "the shift ended")
        #expect("\(SignedOutReason.idle)" == "the worker was idle too long")
        #expect("\(SignedOutReason.admin)" == "an administrator signed the worker out")
        #expect("\(SignedOutReason.user)" == "the worker signed out")
    }
}

/// "Nothing there" as an app asks it, whatever the error's shape.
struct ItemNotFoundTests {
    @Test func onlyTheKeychainsItemNotFoundIsItemNotFound() {
        let notFound = SharedDeviceClientError.keychain(status: -25300, code: "itemNotFound", message: "no such item")
        #expect(notFound.isItemNotFound && notFound.keychainStatus == -25300)
        let duplicate = SharedDeviceClientError.keychain(status: -25299, code: "duplicateItem", message: "exists")
        #expect(!duplicate.isItemNotFound && duplicate.keychainStatus == -25299)
        for other in [SharedDeviceClientError.cancelled, .brokerUnavailable("no broker"),
                      .account(code: "noCurrentAccount", message: "nobody", msalStatus: nil, identityCode: nil)] {
            #expect(!other.isItemNotFound && other.keychainStatus == nil, "\(other)")
        }
    }
}
