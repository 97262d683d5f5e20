import RelayBasics
import Synchronization
import Testing

@Suite("random bytes from the kernel, fetched in blocks")
struct SecureRandomTests {
    @Test("draws across many blocks never repeat, and every bit position varies")
    func distinctAcrossBlocks() {
        var generator = SecureRandom()
        // 40,000 draws of 8 bytes: about 78 blocks of 4 KiB.
        let values = (0..<40_000).map { _ in generator.next() }
        #expect(Set(values).count == values.count)
        let ones = values.reduce(into: [Int](repeating: 0, count: 64)) { counts, value in
            for bit in 0..<64 where value >> UInt64(bit) & 1 == 1 { counts[bit] += 1 }
        }
        // Each bit is set in about half the draws (19,000-21,000 is over 14 standard deviations wide).
        #expect(ones.allSatisfy { (19_000...21_000).contains($0) })
    }

    @Test("fills of every size, larger than a block included, come back filled and different")
    func fills() {
        for size in [1, 7, 16, 4095, 4096, 4097, 10_000] {
            var first = [UInt8](repeating: 0, count: size)
            var second = [UInt8](repeating: 0, count: size)
            first.withUnsafeMutableBytes { SecureRandom.fill($0) }
            second.withUnsafeMutableBytes { SecureRandom.fill($0) }
            if size >= 16 {
                #expect(first != second)
                #expect(first.contains { $0 != 0 })
            }
        }
    }

    @Test("threads drawing at once are never handed the same bytes")
    func concurrentDraws() async {
        let seen = Mutex<[UInt64]>([])
        await withTaskGroup(of: [UInt64].self) { group in
            for _ in 0..<8 {
                group.addTask {
                    var generator = SecureRandom()
                    return (0..<5_000).map { _ in generator.next() }
                }
            }
            for await values in group { seen.withLock { $0.append(contentsOf: values) } }
        }
        let all = seen.withLock { $0 }
        #expect(all.count == 40_000)
        #expect(Set(all).count == all.count)
    }
}
