public import Testing

// What a suite needs, for the test navigators of IDEs that filter by tag; one definition for every test
// target. (This toolchain's `swift test --filter/--skip` take regular expressions over suite and test
// names, not tags: see the README's fast subset.)

extension Tag {
    /// Runs built executables (devicectl, deviced, the workers) as real processes on real files and sockets.
    @Tag public static var integration: Self
    /// Needs root: clients under other uids (setpriv), tmpfs mounts, files chowned to other users.
    @Tag public static var needsRoot: Self
    /// Needs the local identity provider (glewlwyd on loopback, started by the suite).
    @Tag public static var needsIdentityProvider: Self
}
