import CZlib
import Foundation
import Testing
import TestSupport

@Suite("zlib is linked and its gzip output is real gzip")
struct ZlibLinkTests {
    @Test("64 KiB of varied text survives deflate, then both `gzip -dc` and the inflate shim")
    func gzipRoundTrip() throws {
        let input = Self.variedText(bytes: 64 * 1024)
        let compressed = try Self.gzip(input)
        #expect(compressed.starts(with: [0x1f, 0x8b]), "gzip magic")
        #expect(compressed.count < input.count / 2, "text compresses: \(compressed.count) of \(input.count) bytes")

        // The system gzip is an implementation nobody here wrote.
        let file = FileManager.default.temporaryDirectory
            .appendingPathComponent("apns-relay-zlib-\(UUID().uuidString).gz")
        try Data(compressed).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let gzip = try ProcessRunner.capture(["gzip", "-dc", file.path])
        #expect(gzip.status == 0, "\(String(decoding: gzip.standardError, as: UTF8.self))")
        #expect(gzip.standardOutput == Data(input), "gzip -dc gave back \(gzip.standardOutput.count) bytes")

        #expect(try Self.gunzip(compressed) == input)
    }

    /// Words, numbers and punctuation from a fixed-seed generator: compressible
    /// but not a repeating block.
    static func variedText(bytes: Int) -> [UInt8] {
        let words = ["apns", "relay", "token", "push", "alert", "badge", "sound", "priority", "expiration",
                     "collapse", "topic", "Unregistered", "BadDeviceToken", "TooManyRequests", "liveactivity",
                     "élan", "naïve", "日本", "—", "{", "}", ":", ","]
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        var text: [UInt8] = []
        text.reserveCapacity(bytes + 32)
        while text.count < bytes {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let pick = Int(state >> 33)
            let word = pick % 5 == 0 ? String(pick % 100_000) : words[pick % words.count]
            text.append(contentsOf: word.utf8)
            text.append(pick % 11 == 0 ? UInt8(ascii: "\n") : UInt8(ascii: " "))
        }
        return Array(text.prefix(bytes))
    }

    /// Compresses through apns_relay_deflate_init_gzip, in 4 KiB output chunks
    /// so the loop runs more than once.
    static func gzip(_ input: [UInt8]) throws -> [UInt8] {
        try stream(input, name: "deflate", initialize: { apns_relay_deflate_init_gzip($0, Z_DEFAULT_COMPRESSION) },
                   step: { deflate($0, Z_FINISH) }, end: { deflateEnd($0) },
                   more: { result, stream in result == Z_OK || result == Z_BUF_ERROR && stream.pointee.avail_out == 0 })
    }

    /// Decompresses through apns_relay_inflate_init_auto.
    static func gunzip(_ input: [UInt8]) throws -> [UInt8] {
        try stream(input, name: "inflate", initialize: { apns_relay_inflate_init_auto($0) },
                   step: { inflate($0, Z_NO_FLUSH) }, end: { inflateEnd($0) }, more: { result, _ in result == Z_OK })
    }

    /// Runs `input` through one z_stream: `step` until `more` says stop, in 4 KiB
    /// output chunks; the stream must end with Z_STREAM_END.
    static func stream(
        _ input: [UInt8], name: String, initialize: (UnsafeMutablePointer<z_stream>) -> Int32,
        step: (UnsafeMutablePointer<z_stream>) -> Int32, end: (UnsafeMutablePointer<z_stream>) -> Int32,
        more: (Int32, UnsafeMutablePointer<z_stream>) -> Bool
    ) throws -> [UInt8] {
        // zlib keeps a back pointer to the z_stream, so it must not move: heap-allocate it.
        let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        stream.initialize(to: z_stream())
        defer { stream.deallocate() }
        try #require(initialize(stream) == Z_OK)
        defer { _ = end(stream) }

        var source = input
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        let status: Int32 = source.withUnsafeMutableBufferPointer { inputBuffer in
            stream.pointee.next_in = inputBuffer.baseAddress
            stream.pointee.avail_in = UInt32(inputBuffer.count)
            var result = Z_OK
            repeat {
                result = chunk.withUnsafeMutableBufferPointer { out in
                    stream.pointee.next_out = out.baseAddress
                    stream.pointee.avail_out = UInt32(out.count)
                    return step(stream)
                }
                output.append(contentsOf: chunk.prefix(chunk.count - Int(stream.pointee.avail_out)))
            } while more(result, stream)
            return result
        }
        try #require(status == Z_STREAM_END, "\(name) ended with \(status)")
        return output
    }
}
