import Testing

// What each suite needs, for the test navigators of IDEs that filter by tag. (This toolchain's
// `swift test --filter/--skip` take regular expressions over suite and test names, not tags: see the
// README's fast subset.) Every suite here runs the built binaries as real processes (integration).

extension Tag {
    /// Runs the built executables (devicectl, deviced, workers) as real processes on real files and sockets.
    @Tag static var integration: Self
    /// Needs root: clients under other uids (setpriv), tmpfs mounts, files chowned to other users.
    @Tag static var needsRoot: Self
    /// Needs the local identity provider (glewlwyd on loopback, started by the suite).
    @Tag static var needsIdentityProvider: Self
}
