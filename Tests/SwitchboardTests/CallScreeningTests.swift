import Testing
import SIPMessage
import SIPTransaction
import SIPDialog
import SIPRuntime
import NetworkIO
@testable import Switchboard

/// Do-not-disturb and the call directory: the directory itself, the caller's number, and two
/// phones on 127.0.0.1 where screened calls are refused without reaching the application.
@Suite("Call screening: blocked numbers, identification, do-not-disturb")
struct CallScreeningTests {
    @Test func directoryLookups() async throws {
        let d = try SortedCallDirectory(blocking: [100, 15551230000, 15559999999], identification: [(4930123456, "Reception"), (15551230000, "Spam")])
        #expect(await d.entry(for: 15551230000) == .blocked, "blocked wins over a label")
        #expect(await d.entry(for: 4930123456) == .identified(label: "Reception"))
        #expect(await d.entry(for: 100) == .blocked)
        #expect(await d.entry(for: 101) == nil)
        #expect(await d.entry(for: 0) == nil)
        #expect(throws: CallDirectoryError.notAscending(list: "blocking", index: 1)) { try SortedCallDirectory(blocking: [5, 4], identification: []) }
        #expect(throws: CallDirectoryError.duplicate(list: "identification", number: 7)) {
            try SortedCallDirectory(blocking: [], identification: [(7, "a"), (7, "b")])
        }
    }

    static func invite(from: String, pai: String? = nil) throws -> SIPMessage {
        var m = try SIPMessage(method: .invite, uri: try SIPURI("sip:bob@127.0.0.1"))
        try m.append(.from, from + ";tag=1")
        if let pai { try m.append(SIPHeaderName(.pAssertedIdentity), pai) }
        return m
    }

    @Test func callerNumbers() throws {
        #expect(CallScreening.callerNumber(of: try Self.invite(from: "<sip:+1-555-123-0000@carrier.example>")) == 15551230000)
        #expect(CallScreening.callerNumber(of: try Self.invite(from: "<tel:+49-30-123456>")) == 4930123456)
        #expect(CallScreening.callerNumber(of: try Self.invite(from: "<sip:alice@a.example>")) == nil, "a name is not a number")
        #expect(CallScreening.callerNumber(of: try Self.invite(from: "<sip:alice@a.example>", pai: "<sip:+15559999999@carrier.example>")) == 15559999999,
                "P-Asserted-Identity first")
        #expect(CallScreening.callerNumber(of: try Self.invite(from: "<sip:1234567890123456@x>")) == nil, "16 digits is not E.164")
    }

    static func phone(_ user: String, screening: CallScreening = CallScreening()) throws -> Phone {
        var c = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))], timers: CallTests.fast),
                                           identity: try SIPURI("sip:\(user)@127.0.0.1"))
        c.sessionTimer = nil
        return try Phone(name: user, configuration: c, screening: screening)
    }

    @Test("a blocked number gets 603 and never reaches the application; an identified one carries its label", .timeLimit(.minutes(1)))
    func blockedAndIdentified() async throws {
        let directory = try SortedCallDirectory(blocking: [15550001111], identification: [(15550002222, "Front desk")])
        let bob = try Self.phone("bob", screening: CallScreening(directory: directory))
        let spammer = try Self.phone("15550001111"), desk = try Self.phone("15550002222")
        defer { bob.close(); spammer.close(); desk.close() }
        let arrivals = bob.incomingCallStream
        let blocked = await spammer.dial(try CallTests.uri(bob, "bob"))
        let end = try await blocked.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        #expect(end == .ended(.rejected(by: .remote, status: 603)))
        #expect(bob.incomingCalls.isEmpty && bob.calls.isEmpty)
        // The next call to arrive is the desk's, labelled.
        let call = await desk.dial(try CallTests.uri(bob, "bob"))
        let inc = try #require(await CallTests.nextIncoming(arrivals))
        #expect(inc.sipCallID == call.sipCallID)
        #expect(inc.label == "Front desk")
        await call.hangUp(timeout: .seconds(5))
    }

    @Test("do-not-disturb answers 486 without alerting", .timeLimit(.minutes(1)))
    func doNotDisturb() async throws {
        let bob = try Self.phone("bob", screening: CallScreening(doNotDisturb: true))
        let alice = try Self.phone("alice")
        defer { bob.close(); alice.close() }
        let out = await alice.dial(try CallTests.uri(bob, "bob"))
        let end = try await out.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        #expect(end == .ended(.busy(status: 486)))
        #expect(bob.incomingCalls.isEmpty)
    }
}
