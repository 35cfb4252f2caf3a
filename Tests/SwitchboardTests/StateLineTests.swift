import Testing
import SIPMessage
import SIPDialog
import SIPRuntime
import NetworkIO
@testable import Switchboard

/// A phone reports each state change as "name: label"; the lines of the common states are made
/// once (``Phone/stateLine(_:)``), and must read as the label would.
@Suite("Phone: state lines")
struct StateLineTests {
    static func phone(report: Bool) throws -> Phone {
        let c = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))]),
                                           identity: try SIPURI("sip:alice@127.0.0.1"))
        guard report else { return try Phone(name: "alice", configuration: c) }
        return try Phone(name: "alice", configuration: c, report: { (_: String) in })
    }

    static let others: [SessionState] = [
        .proceeding(180), .proceeding(183), .terminated(.rejected(486)), .terminated(.declined(603)),
        .terminated(.dialogGone(481)), .terminated(.authenticationFailed("no credentials")),
    ]

    @Test("every state's line is the phone's name and the state's label, made once or built", arguments: [true, false])
    func lines(report: Bool) throws {
        let phone = try Self.phone(report: report)
        defer { phone.close() }
        for s in Phone.reportedStates + Self.others {
            #expect(phone.stateLine(s) == "alice: \(s.label)")
        }
    }
}
