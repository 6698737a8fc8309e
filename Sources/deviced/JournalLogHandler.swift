import Foundation
import Logging

/// Log lines for the systemd journal: `<N>` priority prefixes (sd-daemon(3)) so the journal keeps each
/// line's level, then `label: message key=value…` on standard error. Used when `$JOURNAL_STREAM` says
/// standard error is the journal; a terminal gets swift-log's usual lines.
struct JournalLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    init(label: String, level: Logger.Level) {
        self.label = label
        logLevel = level
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// syslog priorities: 2 critical, 3 error, 4 warning, 5 notice, 6 info, 7 debug (and trace).
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .critical: 2
        case .error: 3
        case .warning: 4
        case .notice: 5
        case .info: 6
        case .debug, .trace: 7
        }
    }

    func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { $1 } }
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        let fields = merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        // One line per event: a message's own newlines would start lines without a priority.
        let message = "\(event.message)".replacingOccurrences(of: "\n", with: " ")
        let line = "<\(Self.priority(event.level))>\(label): \(message)\(fields.isEmpty ? "" : " " + fields)\n"
        FileHandle.standardError.write(Data(line.utf8))
    }
}
