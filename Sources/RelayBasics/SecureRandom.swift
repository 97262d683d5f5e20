import Synchronization

/// Random bytes from the kernel's CSPRNG, fetched in blocks.
///
/// Every send mints an apns-id and two or three span ids; drawn straight from
/// `SystemRandomNumberGenerator`, each 8 bytes cost one `getrandom` system
/// call. Here one call (`getrandom`) fills a 4 KiB block and ids are cut from it: the bytes
/// are the same kernel CSPRNG output, each handed out exactly once (so ids
/// stay as unique and as unpredictable as before), and the block never
/// leaves the process. Any thread may draw; the lock is held only for the
/// copy (and, once per 4 KiB, the refill).
public struct SecureRandom: RandomNumberGenerator, Sendable {
    public init() {}

    /// Eight fresh random bytes.
    public mutating func next() -> UInt64 {
        var value: UInt64 = 0
        withUnsafeMutableBytes(of: &value) { Self.fill($0) }
        return value
    }

    /// Fills `buffer` with fresh random bytes.
    public static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard buffer.count > 0 else { return }
        // Larger than a block: straight from the kernel, not worth buffering.
        if buffer.count > Block.size {
            kernelFill(buffer)
            return
        }
        block.withLock { block in
            var written = 0
            while written < buffer.count {
                if block.offset == Block.size { block.refill() }
                let take = min(buffer.count - written, Block.size - block.offset)
                block.bytes.withUnsafeBytes { source in
                    let from = UnsafeRawBufferPointer(rebasing: source[block.offset..<block.offset + take])
                    UnsafeMutableRawBufferPointer(rebasing: buffer[written..<written + take]).copyMemory(from: from)
                    // Bytes handed out are wiped, so the block holds only bytes not yet used.
                }
                block.bytes.withUnsafeMutableBytes { bytes in
                    UnsafeMutableRawBufferPointer(rebasing: bytes[block.offset..<block.offset + take]).initializeMemory(as: UInt8.self, repeating: 0)
                }
                block.offset += take
                written += take
            }
        }
    }

    private struct Block: ~Copyable {
        static let size = 4096
        var bytes = [UInt8](repeating: 0, count: size)
        /// The first byte not yet handed out; `size` when the block is used up.
        var offset = size

        mutating func refill() {
            bytes.withUnsafeMutableBytes { SecureRandom.kernelFill($0) }
            offset = 0
        }
    }

    private static let block = Mutex(Block())
}
