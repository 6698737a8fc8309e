import Foundation
import IdentityClient

/// Where the browser flow sends the user: `$DEVICECTL_BROWSER URL` when set, else `xdg-open URL` when a
/// desktop session is there, else the URL printed for the user to open on this machine.
enum SystemBrowser {
    static func open(_ url: URL) async throws(IdentityError) {
        try openNow(url)
    }

    /// `open` without suspending (the opener is started, not waited for).
    static func openNow(_ url: URL) throws(IdentityError) {
        let environment = ProcessInfo.processInfo.environment
        if let command = environment["DEVICECTL_BROWSER"], !command.isEmpty {
            try run(["/bin/sh", "-c", "\(command) \"$0\"", url.absoluteString], name: "DEVICECTL_BROWSER")
            return
        }
        let desktop = environment["DISPLAY"] != nil || environment["WAYLAND_DISPLAY"] != nil
        if desktop,
            let xdgOpen = ["/usr/bin/xdg-open", "/bin/xdg-open"].first(
                where: FileManager.default.isExecutableFile(atPath:)
            )
        {
            try run([xdgOpen, url.absoluteString], name: "xdg-open")
            return
        }
        Output.print("To sign in, open this URL in a browser on this device:\n\(url.absoluteString)")
    }

    /// Starts the opener and returns; it may still be running while the redirect arrives.
    private static func run(_ arguments: [String], name: String) throws(IdentityError) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: arguments[0])
        process.arguments = Array(arguments.dropFirst())
        process.standardOutput = FileHandle.standardError  // standard output stays the command's result
        process.standardInput = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw IdentityError(
                .userCanceled,
                "cannot start the browser (\(name)); set DEVICECTL_BROWSER or use --flow device-code"
            )
        }
    }
}
