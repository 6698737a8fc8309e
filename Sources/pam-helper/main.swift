import Foundation

#if canImport(Glibc)
import Glibc
#endif

// sharedmode-pam-helper: the PAM module pam_sharedmode's other half. The module (C, in the greeter's
// process) starts it for each call with the socketpair as descriptor 3 and relays the PAM conversation;
// this side speaks varlink to deviced. It ends every call with one `result` line.

signal(SIGPIPE, SIG_IGN)
let channel = ModuleChannel()
guard channel.isOpen else {
    FileHandle.standardError.write(Data("sharedmode-pam-helper: run by the PAM module pam_sharedmode only\n".utf8))
    exit(64)
}
let arguments: HelperArguments
do {
    arguments = try HelperArguments.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    channel.error("The sign-in service's helper was started wrongly: \(error.message)")
    channel.result(.serviceError)
    exit(64)
}
do throws(PamFailure) {
    switch arguments.command {
    case .authenticate: try LoginScreenSignIn(arguments: arguments, channel: channel).run()
    case .openSession: try ShiftSession(arguments: arguments, channel: channel).open()
    case .closeSession: try ShiftSession(arguments: arguments, channel: channel).close()
    }
    channel.result(.success)
} catch {
    if let message = error.message { channel.error(message) }
    channel.result(error.code)
}
exit(0)
