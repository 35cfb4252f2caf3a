import Foundation
import Testing
import SIPMessage
import MediaRuntime
@testable import Switchboard
import SwitchboardTestSupport

/// The phone follows the network by itself: it watches the host's addresses (NETLINK_ROUTE)
/// and, when the one it listens on goes away, moves its SIP, media, calls and registrations to
/// another. The live test adds two addresses to the loopback interface with `ip` (root and
/// iproute2, installed by scripts/test), takes the phone's away mid-call and sees the call
/// follow; the addresses are removed afterwards whatever happens.
@Suite("Network watch: following the host's addresses", .serialized)
struct NetworkWatchTests {
    @Test func parsesTheAddressList() {
        let list = HostAddress.parse("lo 127.0.0.1 l\neth0 192.0.2.7 -\neth0 fe80::1 k\nwlan0 2001:db8::7 -\nbroken line\n")
        #expect(list == [
            HostAddress(interface: "lo", address: "127.0.0.1", isLoopback: true),
            HostAddress(interface: "eth0", address: "192.0.2.7"),
            HostAddress(interface: "eth0", address: "fe80::1", isLinkLocal: true),
            HostAddress(interface: "wlan0", address: "2001:db8::7"),
        ])
        #expect(list[3].isIPv6 && !list[1].isIPv6)
    }

    @Test func choosesAReplacementOfTheSameFamily() {
        let host = [
            HostAddress(interface: "lo", address: "127.0.0.1", isLoopback: true),
            HostAddress(interface: "eth0", address: "fe80::1", isLinkLocal: true),
            HostAddress(interface: "wlan0", address: "2001:db8::7"),
            HostAddress(interface: "wlan0", address: "198.51.100.4"),
        ]
        // A routable address of the same family; never loopback or link-local for a routable one.
        #expect(HostAddress.replacement(for: "192.0.2.7", among: host) == "198.51.100.4")
        #expect(HostAddress.replacement(for: "2001:db8::1", among: host) == "2001:db8::7")
        #expect(HostAddress.replacement(for: "192.0.2.7", among: Array(host.prefix(3))) == nil)
        // A loopback phone moves to another loopback address first.
        let loopbacks = host + [HostAddress(interface: "lo", address: "127.0.0.2", isLoopback: true)]
        #expect(HostAddress.replacement(for: "127.0.0.3", among: loopbacks) == "127.0.0.1")
        // The host's own list is readable and has the loopback address.
        #expect(((try? HostAddress.current()) ?? []).contains { $0.address == "127.0.0.1" && $0.isLoopback })
    }

    static let ip = "/usr/sbin/ip"
    static func canChangeAddresses() -> Bool { FileManager.default.isExecutableFile(atPath: ip) && getuid() == 0 }

    static func ipAddress(_ verb: String, _ address: String) async -> ExternalTool.Run {
        await ExternalTool.run(ip, ["addr", verb, "\(address)/32", "dev", "lo"], timeout: 10, mergeErrors: true)
    }

    @Test("the phone's address goes away mid-call: the watch moves it, the call reconnects and the peer's BYE reaches it",
          .timeLimit(.minutes(1)), .requires("root and iproute2 (ip addr add on lo)", { NetworkWatchTests.canChangeAddresses() }))
    func followsWhenTheAddressGoes() async throws {
        let first = "10.201.7.1", second = "10.201.7.2"
        for a in [first, second] { _ = await Self.ipAddress("del", a) }   // left by an interrupted run
        for a in [first, second] {
            let r = await Self.ipAddress("add", a)
            try #require(r.ok, "ip addr add \(a): \(r.output)")
        }
        var removed = false
        defer { if !removed { for a in [first, second] { _ = ExternalTool.runBlocking(Self.ip, ["addr", "del", "\(a)/32", "dev", "lo"], timeout: 10, mergeErrors: true) } } }

        let alice = try CallTests.mediaPhone("alice", listen: first) { $0.localAddress = first }
        defer { alice.close() }
        let bob = try CallTests.mediaPhone("bob") { $0.localAddress = "127.0.0.1" }
        defer { bob.close() }
        let (call, atBob) = try await CallTests.establishedCall(from: alice, to: bob)

        try alice.watchNetwork(timeout: .seconds(5)) { current, addresses in
            current == first && addresses.contains { $0.address == second } ? second : nil
        }
        let changes = alice.networkChangeStream
        let gone = await Self.ipAddress("del", first)
        #expect(gone.ok, "ip addr del: \(gone.output)")
        let change = await within(.seconds(10)) { () async -> NetworkChange? in
            for await c in changes { return c }
            return nil
        }
        let made = try #require(change, "no network change within 10 s")
        #expect(made.address.address.ipString == second)
        #expect(made.reconnected.map(\.id) == [call.id] && made.lost.isEmpty)
        #expect(call.state.isEstablished)
        #expect(alice.agent.contact.sipURI?.host.address == second)
        // Bob's audio reaches the new media session, and his BYE the new Contact.
        let media = try #require(alice.media(call.key))
        var heard: UInt64 = 0
        for _ in 0..<100 {
            heard = media.stats().call.received.packets
            if heard >= 5 { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(heard >= 5, "packets from bob at \(second): \(heard)")
        await atBob.hangUp()
        let end = try await call.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        #expect(end == .ended(.hungUp(by: .remote)))
        alice.stopWatchingNetwork()
        _ = await Self.ipAddress("del", second)
        removed = true
    }
}
