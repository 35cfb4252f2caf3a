import Foundation
import Glibc
import NetworkIO
import SIPTransport
import SwitchboardTestSupport
import Synchronization
import Testing

/// A datagram our own host drops (an output firewall rule, a full queue) is a lost datagram:
/// the send does not fail (that would end the transaction and its call over what a
/// retransmission repairs); it is counted. The live test drops one port's datagrams with an
/// nftables output rule on the host (root and nftables, installed by scripts/test), removed
/// afterwards whatever happens.
@Suite("UDP: datagrams dropped on our own host", .serialized)
struct LocalDropTests {
    @Test func localDropsAreTheFullQueueAndTheFilterVerdicts() {
        for code in [ENOBUFS, EAGAIN, EWOULDBLOCK, EPERM] { #expect(UDPTransport.isLocalDrop(code)) }
        for code in [ECONNREFUSED, EHOSTUNREACH, ENETUNREACH, EMSGSIZE, EBADF, EINVAL] { #expect(!UDPTransport.isLocalDrop(code)) }
    }

    static let nft = "/usr/sbin/nft"

    @Test("a datagram an output rule drops: the send succeeds, counted as dropped locally; the next ones to other ports go out",
          .timeLimit(.minutes(1)), .requires("root and nftables (nft)", { FileManager.default.isExecutableFile(atPath: LocalDropTests.nft) && getuid() == 0 }))
    func outputRuleDrop() async throws {
        let received = Received()
        let sink = try UDPTransport(bindingTo: try SocketAddress("127.0.0.1:0")) { e in
            if case .message = e { received.count.add(1, ordering: .relaxed) }
        }
        defer { sink.close() }
        let dropped = try UDPTransport(bindingTo: try SocketAddress("127.0.0.1:0")) { _ in }
        defer { dropped.close() }
        let sender = try UDPTransport(bindingTo: try SocketAddress("127.0.0.1:0")) { _ in }
        defer { sender.close() }
        let table = "sb_localdrop_\(getpid())"
        defer { _ = ExternalTool.runBlocking(Self.nft, ["delete", "table", "inet", table], timeout: 10, mergeErrors: true) }
        for command in [["add", "table", "inet", table],
                        ["add", "chain", "inet", table, "out", "{ type filter hook output priority 0 ; }"],
                        ["add", "rule", "inet", table, "out", "udp", "dport", String(dropped.localAddress.port), "drop"]] {
            let r = await ExternalTool.run(Self.nft, command, timeout: 10, mergeErrors: true)
            try #require(r.ok, "nft \(command.joined(separator: " ")): \(r.output)")
        }

        let options = Array("OPTIONS sip:x@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:9;branch=z9hG4bK1\r\nFrom: <sip:a@h>;tag=1\r\nTo: <sip:x@h>\r\nCall-ID: c\r\nCSeq: 1 OPTIONS\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n".utf8)
        // Dropped by the rule on the way out: no error, counted.
        for _ in 0..<3 { try sender.send(options, to: dropped.localAddress) }
        #expect(sender.statistics.droppedLocally == 3, "\(sender.statistics)")
        #expect(sender.statistics.sendErrors == 0)
        // Other destinations are untouched.
        try sender.send(options, to: sink.localAddress)
        for _ in 0..<100 where received.count.load(ordering: .relaxed) == 0 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(received.count.load(ordering: .relaxed) == 1)
    }

    final class Received: Sendable {
        let count = Atomic<Int>(0)
    }
}
