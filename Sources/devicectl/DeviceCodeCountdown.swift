import Foundation
import IdentityClient
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Prints the time left while a device-code sign-in waits: on a terminal one updating line, otherwise
/// a line every 30 seconds (to standard error, so standard output stays the result).
final class DeviceCodeCountdown: Sendable {
    private let lastPrinted = Mutex<Int?>(nil)
    private let terminal = isatty(STDERR_FILENO) == 1

    func report(_ progress: DeviceCodeProgress) {
        let line = "waiting for the sign-in… \(clock(progress.secondsLeft)) left"
        if terminal {
            FileHandle.standardError.write(Data("\r\(line)   ".utf8))
            return
        }
        let due = lastPrinted.withLock { last -> Bool in
            guard last.map({ $0 - progress.secondsLeft >= 30 }) ?? true else { return false }
            last = progress.secondsLeft
            return true
        }
        if due { FileHandle.standardError.write(Data((line + "\n").utf8)) }
    }
}

/// The time left, as `14:32`.
func clock(_ seconds: Int) -> String {
    String(format: "%d:%02d", max(seconds, 0) / 60, max(seconds, 0) % 60)
}
