/// MSAL's prompt types (`MSALPromptType`), sent as the OpenID Connect `prompt` parameter.
public enum Prompt: String, Sendable, CaseIterable {
    /// Let the user pick an account.
    case selectAccount = "select_account"
    /// Ask for credentials even when a session exists.
    case login
    /// Ask for consent again.
    case consent
    /// Never show UI; fail with `interaction_required` when it would be needed.
    case none
}
