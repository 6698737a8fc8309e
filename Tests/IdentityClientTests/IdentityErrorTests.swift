import Foundation
import IdentityClient
import Testing

/// `IdentityError.Code` is an extensible struct: matchable in `catch` like swift-system's `Errno`,
/// hashable, printable, with MSAL's numeric codes.
struct IdentityErrorTests {
    private func fail(_ code: IdentityError.Code) throws {
        throw IdentityError(code, "test failure")
    }

    @Test func aCodeMatchesInACatchClause() {
        var matched = ""
        do {
            try fail(.interactionRequired)
        } catch IdentityError.Code.userCanceled {
            matched = "userCanceled"
        } catch IdentityError.Code.interactionRequired {
            matched = "interactionRequired"
        } catch {
            matched = "other"
        }
        #expect(matched == "interactionRequired")
    }

    @Test func aCodeDoesNotMatchAnotherErrorType() {
        struct Other: Error {}
        #expect(!(IdentityError.Code.serverError ~= Other()))
        #expect(IdentityError.Code.serverError ~= IdentityError(.serverError, "x"))
    }

    @Test func codesAreHashableAndPrintTheirSnakeCaseName() {
        let codes: Set<IdentityError.Code> = [.interactionRequired, .interactionRequired, .declinedScopes]
        #expect(codes.count == 2)
        #expect("\(IdentityError.Code.invalidIDToken)" == "invalid_id_token")
        #expect(IdentityError.Code.deviceCodeExpired.rawValue == "device_code_expired")
    }

    @Test func msalErrorCodesFollowTheCode() {
        #expect(IdentityError(.interactionRequired, "").msalErrorCode == -50002)
        #expect(IdentityError(.declinedScopes, "").msalErrorCode == -50003)
        #expect(IdentityError(.userCanceled, "").msalErrorCode == -50005)
        for code in [IdentityError.Code.serverError, .accessDenied, .deviceCodeExpired] {
            #expect(IdentityError(code, "").msalErrorCode == -50006)
        }
        #expect(IdentityError(.unsupported, "").msalErrorCode == -50000)
    }
}
