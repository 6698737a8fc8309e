/// Flatpak's rule for an application id (`flatpak_is_valid_name`): at most 255 characters, at least three
/// elements separated by `.`, each non-empty, of ASCII letters, digits, `_` and (in the last element only)
/// `-`, and not starting with a digit.
public enum FlatpakAppID {
    /// The longest id Flatpak accepts.
    public static let maximumLength = 255

    /// Whether `id` is a valid Flatpak application id.
    public static func isValid(_ id: String) -> Bool {
        guard !id.isEmpty, id.utf8.count <= maximumLength else { return false }
        let elements = id.split(separator: ".", omittingEmptySubsequences: false)
        guard elements.count >= 3 else { return false }
        for (position, element) in elements.enumerated() {
            guard let first = element.unicodeScalars.first, !("0"..."9").contains(first) else { return false }
            let isLast = position == elements.count - 1
            for scalar in element.unicodeScalars {
                switch scalar {
                case "a"..."z", "A"..."Z", "0"..."9", "_": continue
                case "-" where isLast: continue
                default: return false
                }
            }
        }
        return true
    }
}
