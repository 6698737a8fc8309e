import SharedDeviceClient
import Testing

/// A sign-out event's reason: the broker's five words and any other, kept.
struct SignedOutReasonTests {
    @Test func theBrokersWordsBecomeCasesAndComeBackUnchanged() {
        let words = [
            "user": SignedOutReason.user, "shift-end": .shiftEnd, "admin": .admin, "idle": .idle,
            "session-end": .sessionEnd,
        ]
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
        #expect("\(SignedOutReason.sessionEnd)" == "the shift's login session ended")
    }
}

/// "Nothing there" as an app asks it, whatever the error's shape.
struct ItemNotFoundTests {
    @Test func onlyTheKeychainsItemNotFoundIsItemNotFound() {
        let notFound = SharedDeviceClientError(.itemNotFound, "no such item", keychainStatus: -25300)
        #expect(notFound.isItemNotFound && notFound.keychainStatus == -25300)
        let duplicate = SharedDeviceClientError(.duplicateItem, "exists", keychainStatus: -25299)
        #expect(!duplicate.isItemNotFound && duplicate.keychainStatus == -25299)
        for other in [
            SharedDeviceClientError(.cancelled, "cancelled"), SharedDeviceClientError(.brokerUnavailable, "no broker"),
            SharedDeviceClientError(.noCurrentAccount, "nobody"),
        ] {
            #expect(!other.isItemNotFound && other.keychainStatus == nil, "\(other)")
        }
    }
}

/// Apps match codes, not strings.
struct ErrorCodeTests {
    func find() async throws(SharedDeviceClientError) {
        throw SharedDeviceClientError(
            .init(name: "itemNotFound"),
            "no item matched; add one first",
            keychainStatus: -25300
        )
    }

    @Test func aCodeMatchesInCatchWhateverTheMessageSays() async {
        var caught = "nothing"
        do {
            try await find()
        } catch SharedDeviceClientError.Code.duplicateItem {
            caught = "duplicate"
        } catch SharedDeviceClientError.Code.itemNotFound {
            caught = "not found"
        } catch {
            caught = "other \(error)"
        }
        #expect(caught == "not found")
    }

    @Test func aCodeThisClientDoesNotKnowArrivesByItsName() {
        let newer = SharedDeviceClientError(
            .init(name: "seatLimitReached"),
            "every seat is taken; sign someone out first"
        )
        #expect(newer.code.name == "seatLimitReached" && newer.code != .refused)
        #expect("\(newer)" == "every seat is taken; sign someone out first (seatLimitReached)")
    }

    @Test func theDescriptionEndsWithWhatNamesTheFailure() {
        #expect(
            "\(SharedDeviceClientError(.itemNotFound, "none", keychainStatus: -25300))" == "none (itemNotFound, -25300)"
        )
        #expect(
            "\(SharedDeviceClientError(.identity, "sign in again", msalStatus: -50002, identityCode: "interaction_required"))"
                == "sign in again (interaction_required)"
        )
        #expect(
            "\(SharedDeviceClientError(.limitExceeded, "narrow the query", limit: "replyBytes", maximum: 4_194_304))"
                == "narrow the query (replyBytes)"
        )
        #expect(
            "\(SharedDeviceClientError(.brokerUnavailable, "no broker at /x: start it", socketPath: "/x"))"
                == "no broker at /x: start it"
        )
    }
}
