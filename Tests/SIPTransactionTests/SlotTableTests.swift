import Testing
import SIPMessage
@testable import SIPTransaction

@Suite("Slot table: transactions and timers in chunks that never move")
struct SlotTableTests {
    /// Slots are handed out in order, across chunk boundaries; a vacated slot is reused first
    /// (most recent first); what a slot holds is changed where it lies.
    @Test func slotsAreReusedMostRecentFirst() {
        var t = SlotTable<String>()
        let size = t.chunkSize
        let n = size * 2 + 3
        for i in 0..<n { #expect(t.insert("v\(i)") == i) }
        #expect(t.count == n)
        #expect(t[n - 1] == "v\(n - 1)")
        #expect(t.remove(5) == "v5")
        #expect(t.remove(size + 1) == "v\(size + 1)")
        #expect(t.remove(5) == nil)
        #expect(t[5] == nil)
        #expect(t.count == n - 2)
        #expect(t.nextSlot == size + 1)
        #expect(t.insert("a") == size + 1)
        #expect(t.insert("b") == 5)
        #expect(t.insert("c") == n)
        t[5]! += "!"
        #expect(t[5] == "b!")
        #expect(t.modify(5) { $0.count } == 2)
        #expect(t.remove(7) != nil)
        #expect(t.modify(7) { _ in 1 } == nil)
        #expect(t[-1] == nil && t[n + 10] == nil && t.remove(n + 10) == nil)
    }

    /// A table that follows another's slots grows to the slot it is given.
    @Test func putGrowsToTheSlot() {
        var t = SlotTable<Int>()
        t.put(7, at: 600)
        #expect(t.count == 1)
        #expect(t[600] == 7 && t[599] == nil)
        t.put(8, at: 600)
        #expect(t.count == 1 && t[600] == 8)
        #expect(t.take(600) == 8)
        #expect(t.take(600) == nil)
        #expect(t.count == 0)
    }

    /// An id names its slot and a sequence number: a removed id matches nothing, even once its
    /// slot holds another value; the value is built knowing its own id; no id is 0.
    @Test func aSlotMapIDOutlivesNothingItNamed() {
        var m = SlotMap<UInt64>()
        let a = m.insert { $0 }
        let b = m.insert { $0 }
        #expect(a != 0 && b != 0 && a != b)
        #expect(SlotMap<UInt64>.slot(ofID: a) == 0 && SlotMap<UInt64>.slot(ofID: b) == 1)
        #expect(m[slot: m.slot(of: b)!] == b)
        #expect(m.remove(a) == a)
        #expect(m.remove(a) == nil && !m.contains(a) && m.count == 1)
        let c = m.allocateID()
        #expect(SlotMap<UInt64>.slot(ofID: c) == 0 && c != a)
        m.store(7, as: c)
        #expect(m.slot(of: a) == nil && m.slot(of: c) == 0 && m[slot: 0] == 7)
        m[slot: 0]! += 1
        #expect(m.remove(c) == 8)
        #expect(!m.contains(0) && m.slot(of: 0) == nil && m.remove(0) == nil)
        #expect(m.slot(of: UInt64(1) << 32 | 999) == nil)
    }

    /// A chunk holds 128 KiB to 256 KiB of slots (at least 64), a power of two.
    @Test func chunksAreSizedByTheElement() {
        #expect(SlotTable<UInt8>().chunkSize == 1 << 17)
        let entries = SlotTable<TransactionLayer<String>.Entry>().chunkSize * MemoryLayout<TransactionLayer<String>.Entry?>.stride
        #expect(entries >= 1 << 17 && entries <= 1 << 18)
        #expect(SlotTable<InlineArray<8192, UInt64>>().chunkSize == 64)
    }

    /// A transaction's id names its slot; once the transaction ends, a new one reuses the slot
    /// under another id, and the old id (a late timer, a late response) matches nothing.
    @Test func anEndedTransactionsIDDoesNotMatchItsSlotsNextTransaction() throws {
        var layer = TransactionLayer<String>(timers: .rfc3261, seed: 1)
        let bye = request("BYE", branch: "z9hG4bKs1")
        let out = layer.receive(bye, from: "alice", reliable: true)
        guard case .request(_, _, let first)? = out.first else { Issue.record("no request"); return }
        // Reliable transport: Timer J is zero; firing it ends the transaction.
        _ = layer.respond(response(200, to: bye), in: first)
        _ = layer.timerFired(first, .J)
        #expect(!layer.contains(first))
        let bye2 = request("BYE", branch: "z9hG4bKs2")
        guard case .request(_, _, let second)? = layer.receive(bye2, from: "alice", reliable: true).first else { Issue.record("no request"); return }
        #expect(second.slot == first.slot)
        #expect(second != first)
        #expect(layer.contains(second))
        #expect(layer.timerFired(first, .J).isEmpty)
        #expect(layer.respond(response(200, to: bye), in: first).isEmpty)
        #expect(layer.stateDescription(second) == "trying")
        #expect(layer.count == 1)
    }
}
