internal import CZlib

/// Every zlib call of the relay, behind one fence: CRC-32 (audit spool and
/// journal records, migration checksums), gzip (HTTP bodies) and the
/// library's version (build info). Foundation-free.
public enum Zlib {
    /// The CRC-32 (IEEE 802.3, as gzip and PNG use) of `bytes`.
    public static func crc32(_ bytes: some Collection<UInt8>) -> UInt32 {
        if let value = bytes.withContiguousStorageIfAvailable({ crc32($0) }) { return value }
        return Array(bytes).withUnsafeBufferPointer { crc32($0) }
    }

    /// zlib's value, by carry-less multiplication where the CPU has it
    /// (`apns_relay_crc32`, CZlib/crc32_pclmul.c): two audit journal
    /// records per send, and zlib's own loop was ~3,700 instructions of them.
    private static func crc32(_ buffer: UnsafeBufferPointer<UInt8>) -> UInt32 {
        guard let start = buffer.baseAddress else { return 0 }
        return apns_relay_crc32(0, start, buffer.count)
    }

    /// zlib's own `crc32`, for the tests that hold ``crc32(_:)`` to it.
    static func zlibCRC32(_ buffer: UnsafeBufferPointer<UInt8>) -> UInt32 {
        // zlib takes a uInt length: feed buffers past 4 GiB in pieces.
        var value: uLong = 0
        var start = buffer.baseAddress
        var remaining = buffer.count
        repeat {
            let chunk = min(remaining, Int(UInt32.max))
            value = CZlib.crc32(value, start, uInt(chunk))
            start = start.map { $0 + chunk }
            remaining -= chunk
        } while remaining > 0
        return UInt32(truncatingIfNeeded: value)
    }

    /// The running zlib's version, e.g. `1.3.1`.
    public static var version: String {
        guard let text = zlibVersion() else { return "unknown" }
        return String(cString: text)
    }

    /// `bytes` as a complete gzip member, or nil if zlib fails.
    public static func gzip(_ bytes: [UInt8], level: Int32 = 6) -> [UInt8]? {
        // zlib keeps a pointer back to the z_stream: it must not move, so it
        // lives on the heap rather than in a Swift variable passed by `&`.
        let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        stream.initialize(to: z_stream())
        defer { stream.deallocate() }
        guard apns_relay_deflate_init_gzip(stream, level) == Z_OK else { return nil }
        defer { deflateEnd(stream) }
        var output = [UInt8](repeating: 0, count: Int(deflateBound(stream, uLong(bytes.count))) + 32)
        let status: Int32 = bytes.withUnsafeBufferPointer { input in
            output.withUnsafeMutableBufferPointer { out in
                stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress)
                stream.pointee.avail_in = uInt(input.count)
                stream.pointee.next_out = out.baseAddress
                stream.pointee.avail_out = uInt(out.count)
                return deflate(stream, Z_FINISH)
            }
        }
        guard status == Z_STREAM_END else { return nil }
        output.removeSubrange(Int(stream.pointee.total_out)...)
        return output
    }

    /// Decompresses gzip or zlib data; nil if it is broken, truncated or
    /// longer than `limit` bytes once inflated.
    public static func gunzip(_ bytes: [UInt8], limit: Int = 64 << 20) -> [UInt8]? {
        let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        stream.initialize(to: z_stream())
        defer { stream.deallocate() }
        guard apns_relay_inflate_init_auto(stream) == Z_OK else { return nil }
        defer { inflateEnd(stream) }
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        return bytes.withUnsafeBufferPointer { input -> [UInt8]? in
            stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress)
            stream.pointee.avail_in = uInt(input.count)
            while true {
                let status: Int32 = chunk.withUnsafeMutableBufferPointer { out in
                    stream.pointee.next_out = out.baseAddress
                    stream.pointee.avail_out = uInt(out.count)
                    return inflate(stream, Z_NO_FLUSH)
                }
                output.append(contentsOf: chunk[0..<(chunk.count - Int(stream.pointee.avail_out))])
                if output.count > limit { return nil }
                if status == Z_STREAM_END { return output }
                if status != Z_OK { return nil }
                if stream.pointee.avail_in == 0 && stream.pointee.avail_out != 0 { return nil }  // truncated input
            }
        }
    }
}
