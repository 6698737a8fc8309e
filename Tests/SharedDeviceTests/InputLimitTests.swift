import Foundation
import KeychainStore
import SharedDevice
import Testing

/// Input over a limit is refused before it costs time or memory, with an error naming the limit and
/// without echoing the input back in full.
struct InputLimitTests {
    typealias P = PolicyDecodingTests

    @Test func aPolicyDocumentOverOneMebibyteIsRefusedBeforeParsing() throws {
        // Valid JSON padded with spaces past the limit: only the size can make it fail.
        var document = try JSONSerialization.data(withJSONObject: try P.kiosk())
        document.append(Data(repeating: UInt8(ascii: " "), count: InputLimits.policyDocumentBytes + 1 - document.count))
        #expect(document.count == InputLimits.policyDocumentBytes + 1)
        let error = try #require(throws: PolicyError.self) { try DevicePolicy.decode(document) }
        #expect(error.path == "(document)")
        #expect(error.problem.contains("1 MiB"))
        // One byte less is a policy like any other.
        document.removeLast()
        #expect(throws: Never.self) { try DevicePolicy.decode(document) }
    }

    @Test func aPolicyFileOverTheLimitIsRefusedWithoutReadingPastIt() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "input-limits-\(UUID().uuidString)"
        )
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("huge.json")
        // A sparse 64 MiB file: reading it whole would take 64 MiB; the bounded read takes the limit + 1.
        #expect(FileManager.default.createFile(atPath: file.path, contents: Data("{".utf8)))
        let handle = try FileHandle(forWritingTo: file)
        try handle.truncate(atOffset: 64 << 20)
        try handle.close()
        let error = try #require(throws: PolicyError.self) { try DevicePolicy.load(contentsOf: file) }
        #expect(error.path == file.path)
        #expect(error.problem.contains("1 MiB"))
        guard case .tooLarge = try BoundedInput.read(contentsOf: file.path, limit: 1024) else {
            Issue.record("a 64 MiB file read with a 1 KiB limit was not refused")
            return
        }
        guard case .complete(let whole) = try BoundedInput.read(contentsOf: file.path, limit: 64 << 20) else {
            Issue.record("a file exactly at the limit was refused")
            return
        }
        #expect(whole.count == 64 << 20)
    }

    /// The two names a policy bounds.
    enum BoundedName: String, CaseIterable, Sendable {
        case deviceName = "device.name"
        case appID = "apps[0].id"

        func set(_ text: String, in document: inout [String: Any]) {
            switch self {
            case .deviceName:
                var device = document["device"] as! [String: Any]
                device["name"] = text
                document["device"] = device
            case .appID:
                var apps = document["apps"] as! [[String: Any]]
                apps[0]["id"] = text
                document["apps"] = apps
            }
        }
    }

    @Test(arguments: BoundedName.allCases)
    func aNameOverTwoHundredFiftyFiveCharactersIsRefusedAndNotEchoedInFull(_ name: BoundedName) throws {
        let atLimit = String(repeating: "a", count: InputLimits.nameCharacters)
        #expect(try P.error { name.set(atLimit, in: &$0) } == nil, "\(name.rawValue) of exactly 255 characters")
        let over = String(repeating: "b", count: 100_000)
        let error = try #require(try P.error { name.set(over, in: &$0) })
        #expect(error.path == name.rawValue)
        #expect(error.problem.contains("100000 characters"))
        #expect(error.problem.contains("255"))
        #expect(error.description.count < 300, "the error echoes the whole name: \(error.description.count) characters")
    }

    @Test func aPolicyWithMoreThanAThousandAppsIsRefused() throws {
        func apps(_ count: Int) -> [[String: Any]] {
            (0..<count).map {
                ["id": "com.contoso.app\($0)", "accessGroups": ["com.contoso.app\($0)"], "uid": 10_000 + $0]
            }
        }
        #expect(try P.error { $0["apps"] = apps(InputLimits.apps) } == nil)
        let error = try #require(try P.error { $0["apps"] = apps(InputLimits.apps + 1) })
        #expect(error.path == "apps")
        #expect(error.problem.contains("1001 apps") && error.problem.contains("1000"))
    }

    @Test func aCacheDocumentOverSixteenMebibytesIsRefusedAndNothingIsWritten() throws {
        let fixture = try CacheFixture.Store()
        // Well-formed JSON padded past the limit with whitespace: only its size can make it fail.
        var document = Data(#"{"AccessToken": {}}"#.utf8)
        document.append(Data(repeating: UInt8(ascii: " "), count: InputLimits.cacheDocumentBytes + 1 - document.count))
        let error = CacheFixture.caughtError {
            try TokenCache().importJSON(document, as: CacheFixture.scanner, in: fixture.store)
        }
        let cacheError = try #require(error as? TokenCacheError)
        #expect(cacheError.code == .invalidCacheDocument)
        #expect(cacheError.description.contains("16 MiB"))
        #expect(try fixture.store.metadata(as: CacheFixture.scanner).isEmpty)
        document.removeLast()
        #expect(try TokenCache().importJSON(document, as: CacheFixture.scanner, in: fixture.store) == 0)
    }
}
