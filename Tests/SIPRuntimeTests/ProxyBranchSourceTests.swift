import Testing
@testable import SIPProxy

/// The proxy's branch source: SipHash-2-4 as published, and keyed so that its output is
/// neither repeated nor shared between two proxies.
@Suite("Proxy branch source")
struct ProxyBranchSourceTests {
    @Test("SipHash-2-4 gives the reference implementation's value for key 00..0f and message 00..07")
    func sipHashReferenceVector() {
        let value = BranchSource.sipHash24(k0: 0x0706_0504_0302_0100, k1: 0x0F0E_0D0C_0B0A_0908, word: 0x0706_0504_0302_0100)
        #expect(value == 0x93F5_F579_9A93_2462)
    }

    @Test("Branches do not repeat, and two sources with their own keys give different ones")
    func branchesAreUniqueAndKeyed() {
        let a = BranchSource(), b = BranchSource()
        let first = (0..<10_000).map { _ in a.next() }
        #expect(Set(first).count == first.count)
        #expect(Set(first).isDisjoint(with: (0..<10_000).map { _ in b.next() }))
    }
}
