import Testing
import Synchronization
import SIPMessage
import SIPRuntime
import NetworkIO
@testable import Switchboard

/// Key-value call data: its encodings (form text, RFC 7433 User-to-User in hex), bad input, and
/// the data attached to an INVITE and sent during a call between two phones on 127.0.0.1.
@Suite("Call data")
struct CallDataTests {
    @Test("form encoding round-trips keys and values with spaces, &, =, % and non-ASCII text, in order")
    func roundTrip() throws {
        let data: CallData = ["queue": "sales & support", "customer": "42=x%", "name": "Zoë 🙂", "empty": ""]
        #expect(data.encoded == "queue=sales%20%26%20support&customer=42%3Dx%25&name=Zo%C3%AB%20%F0%9F%99%82&empty=")
        #expect(try CallData(encoded: data.encoded) == data)
        #expect(try CallData(userToUser: data.userToUserValue) == data)
        #expect(data.userToUserValue.hasSuffix(";encoding=hex;purpose=call-data"))
        // Form conventions accepted: `+` is a space, a key alone has an empty value, repeated keys keep the last.
        let parsed = try CallData(encoded: "a=1+2&b&a=3")
        #expect(parsed.pairs.map(\.key) == ["a", "b"])
        #expect(parsed["a"] == "3" && parsed["b"] == "")
    }

    @Test("bad input gets a typed error, never a crash", arguments: [
        ("a=%4", CallDataError.malformed("bad escape at byte 0 of \"%4\"")),
        ("a=%zz", .malformed("bad escape at byte 0 of \"%zz\"")),
        ("=1", .malformed("a pair without a key")),
        ("a=%FF", .malformed("call data is not UTF-8")),
    ])
    func badForms(text: String, error: CallDataError) {
        #expect(throws: error) { try CallData(encoded: text) }
    }

    @Test("User-to-User: other purposes are not ours; bad hex, odd length and oversize are errors")
    func userToUser() throws {
        #expect(try CallData(userToUser: "0102;encoding=hex;purpose=isdn-interwork") == nil)
        #expect(try CallData(userToUser: "0102") == nil)
        #expect(throws: CallDataError.malformed("byte 0 of the User-to-User value is not a hex digit")) {
            try CallData(userToUser: "zz;encoding=hex;purpose=call-data")
        }
        #expect(throws: CallDataError.malformed("odd number of hex digits")) { try CallData(userToUser: "616;encoding=hex;purpose=call-data") }
        #expect(throws: CallDataError.malformed("User-to-User call data must be hex-encoded")) { try CallData(userToUser: "a=1;purpose=call-data") }
        let big = String(repeating: "61", count: CallData.maximumEncodedSize + 1)
        #expect(throws: CallDataError.tooLarge(CallData.maximumEncodedSize + 1)) { try CallData(userToUser: big + ";encoding=hex;purpose=call-data") }
    }

    @Test("attached to the INVITE and read by the callee; sent during the call both ways as events; refused sizes throw",
          .timeLimit(.minutes(1)))
    func live() async throws {
        let alice = try CallTests.phone("alice")
        let invites = Mutex<[SIPMessage]>([])
        var c = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))], timers: CallTests.fast),
                                           identity: try SIPURI("sip:bob@127.0.0.1"))
        c.sessionTimer = nil
        let bob = try Phone(name: "bob", configuration: c, trace: { m, outgoing, _ in
            if !outgoing, m.method == .invite { invites.withLock { $0.append(m) } }
        })
        defer { alice.close(); bob.close() }
        let arrivals = bob.incomingCallStream
        let out = try await alice.dial(try CallTests.uri(bob, "bob"), options: CallOptions(attachedData: ["queue": "billing", "customer": "C-1017"], sessionToken: "tok-123", tag: "tx-9"))
        let inc = try #require(await CallTests.nextIncoming(arrivals))
        #expect(inc.attachedData == ["queue": "billing", "customer": "C-1017"])
        #expect(out.attachedData.isEmpty)
        #expect(out.tag == "tx-9")
        // The token rides in Authorization (RFC 8898); the tag stays home.
        let invite = try #require(invites.withLock { $0.first })
        #expect(invite.values(.authorization) == ["Bearer tok-123"])
        #expect(!String(decoding: invite.serialized(), as: UTF8.self).contains("tx-9"))
        let bobEvents = inc.events, aliceEvents = out.events
        try await inc.answer(timeout: .seconds(5))
        try await out.waitUntil(timeout: .seconds(5)) { $0.isEstablished }
        try await out.send(data: ["note": "VIP, be nice"], timeout: .seconds(5))
        try await inc.send(data: ["agent": "Dana"], timeout: .seconds(5))
        let toBob = await within(.seconds(5)) { () -> CallData? in
            for await e in bobEvents { if case .data(let d) = e { return d } }
            return nil
        }
        let toAlice = await within(.seconds(5)) { () -> CallData? in
            for await e in aliceEvents { if case .data(let d) = e { return d } }
            return nil
        }
        #expect(toBob == ["note": "VIP, be nice"])
        #expect(toAlice == ["agent": "Dana"])
        let huge = CallData([("blob", String(repeating: "x", count: CallData.maximumEncodedSize))])
        await #expect(throws: CallError.self) { try await out.send(data: huge) }
        await #expect(throws: CallDataError.tooLarge(CallData.maximumEncodedSize + 5)) {
            _ = try await alice.dial(try CallTests.uri(bob, "bob"), options: CallOptions(attachedData: huge))
        }
        await out.hangUp(timeout: .seconds(5))
        await #expect(throws: CallError.invalidState(action: "send data", state: out.state)) { try await out.send(data: ["a": "b"]) }
    }
}
