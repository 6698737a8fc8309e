public import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Another process's memory, as a core file of it would hold it: every writable mapping (heap, stacks,
/// anonymous maps, libraries' data), read through `/proc/PID/mem` (root, or the process's own user while
/// it is dumpable). Faster than `gcore`, which reads the whole debug binary first.
public enum ProcessMemory {
    /// What a scan found: how many times each needle occurs, how many bytes were read, and how many could
    /// not be (pages the process unmapped meanwhile).
    public struct Scan: Sendable {
        public var counts: [Int]
        public var bytesRead: Int
        public var bytesUnreadable: Int
    }

    /// Counts each of `needles` (non-empty) in the writable memory of `pid`, in one pass.
    public static func occurrences(of needles: [Data], inWritableMemoryOf pid: pid_t) throws -> Scan {
        // Read to the end: procfs files report no size, and a sized read would stop after the first page.
        let mapsFile = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/\(pid)/maps"))
        let maps = String(decoding: try mapsFile.readToEnd() ?? Data(), as: UTF8.self)
        try mapsFile.close()
        let descriptor = open("/proc/\(pid)/mem", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(descriptor) }
        let chunkSize = 1 << 20
        // A chunk follows the tail of the one before, so that a needle across two is found once.
        let overlap = max((needles.map(\.count).max() ?? 1) - 1, 0)
        var buffer = [UInt8](repeating: 0, count: overlap + chunkSize)
        var scan = Scan(counts: Array(repeating: 0, count: needles.count), bytesRead: 0, bytesUnreadable: 0)
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 2, fields[1].hasPrefix("rw") else { continue }
            let bounds = fields[0].split(separator: "-").compactMap { UInt64($0, radix: 16) }
            guard bounds.count == 2, bounds[1] > bounds[0] else { continue }
            var carried = 0
            var offset = bounds[0]
            while offset < bounds[1] {
                let length = Int(min(UInt64(chunkSize), bounds[1] - offset))
                let got = buffer.withUnsafeMutableBytes {
                    pread(descriptor, $0.baseAddress! + carried, length, off_t(Int64(bitPattern: offset)))
                }
                guard got > 0 else {
                    scan.bytesUnreadable += length
                    carried = 0
                    offset += UInt64(length)
                    continue
                }
                scan.bytesRead += got
                let filled = carried + got
                buffer.withUnsafeBytes { window in
                    for (index, needle) in needles.enumerated() {
                        scan.counts[index] += count(
                            needle,
                            in: UnsafeRawBufferPointer(rebasing: window[0..<filled]),
                            startingAfter: carried - needle.count + 1
                        )
                    }
                }
                // Keep the last `overlap` bytes in front of the next chunk.
                carried = min(overlap, filled)
                buffer.withUnsafeMutableBytes {
                    $0.baseAddress!.copyMemory(from: $0.baseAddress! + (filled - carried), byteCount: carried)
                }
                offset += UInt64(got)
            }
        }
        return scan
    }

    /// Occurrences of `needle` in `window` that end past the carried-over bytes (those that start at or
    /// after `start`), so none is counted twice.
    private static func count(_ needle: Data, in window: UnsafeRawBufferPointer, startingAfter start: Int) -> Int {
        var found = 0
        var position = max(start, 0)
        needle.withUnsafeBytes { pattern in
            let first = Int32(pattern[0])
            // memchr to the needle's first byte, then memcmp (glibc's memmem is not in the Glibc module).
            while position + pattern.count <= window.count,
                let hit = memchr(window.baseAddress! + position, first, window.count - pattern.count + 1 - position)
            {
                let at = UnsafeRawPointer(hit) - UnsafeRawPointer(window.baseAddress!)
                if memcmp(hit, pattern.baseAddress!, pattern.count) == 0 { found += 1 }
                position = at + 1
            }
        }
        return found
    }
}
