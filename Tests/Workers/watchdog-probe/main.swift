// watchdog-probe: a test helper that starts one child the way the tests do (`ChildProcess`), prints
// `child <pid>` and waits to be killed (ChildWatchdogTests kill it with SIGKILL, as a crashed test run
// dies, and check that the child dies with it).
//
//   watchdog-probe EXECUTABLE [ARGUMENTS…]

import Foundation
import ProcessTestSupport

#if canImport(Glibc)
import Glibc
#endif

let arguments = Array(CommandLine.arguments.dropFirst())
guard let executable = arguments.first else { WorkerOutput.fail("usage: watchdog-probe EXECUTABLE [ARGUMENTS…]") }
do {
    let child = try ChildProcess(URL(fileURLWithPath: executable), Array(arguments.dropFirst()))
    WorkerOutput.say("child \(child.pid)")
    while true { pause() }
} catch {
    WorkerOutput.fail("cannot start \(executable): \(error)")
}
