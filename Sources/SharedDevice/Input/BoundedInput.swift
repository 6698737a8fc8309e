public import Foundation
public import SystemPackage

/// Reads a whole file or standard input, but never more than a limit: at most `limit + 1` bytes are
/// read, so a document over the limit is refused without being loaded.
public enum BoundedInput {
    /// What a bounded read found.
    public enum Outcome: Sendable {
        /// The whole input, at most `limit` bytes.
        case complete(Data)
        /// More than `limit` bytes: nothing past the limit was read.
        case tooLarge
    }

    /// Reads the file at `path`.
    /// - Throws: the `Errno` of a file that cannot be opened or read.
    public static func read(contentsOf path: String, limit: Int) throws(Errno) -> Outcome {
        let descriptor: FileDescriptor
        do {
            descriptor = try FileDescriptor.open(FilePath(path), .readOnly, options: [.closeOnExec])
        } catch let error as Errno {
            throw error
        } catch {
            throw Errno.ioError
        }
        defer { try? descriptor.close() }
        return try read(descriptor, limit: limit)
    }

    /// Reads standard input to its end.
    public static func readStandardInput(limit: Int) throws(Errno) -> Outcome {
        try read(.standardInput, limit: limit)
    }

    private static func read(_ descriptor: FileDescriptor, limit: Int) throws(Errno) -> Outcome {
        var data = Data()
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while data.count <= limit {
            let wanted = min(chunk.count, limit + 1 - data.count)
            let got: Int
            do {
                got = try chunk.withUnsafeMutableBytes {
                    try descriptor.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[..<wanted]))
                }
            } catch let error as Errno {
                throw error
            } catch {
                throw Errno.ioError
            }
            if got == 0 { return .complete(data) }
            data.append(contentsOf: chunk[..<got])
        }
        return .tooLarge
    }
}
