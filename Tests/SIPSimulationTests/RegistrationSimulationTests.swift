import Testing
import SIPMessage
import SIPTransaction
import SIPAuth
import SIPDialog
@testable import SIPSimulation

/// The registration client driven through real transactions on the simulated network, against
/// a registrar node that challenges and verifies with DigestServer: hours of refreshes at 20%
/// loss run in milliseconds.
@Suite("Registration over the simulated network")
struct RegistrationSimulationTests {
    final class Harness {
        let sim: Simulation
        let uac: SimulatedNode
        let registrarNode: SimulatedNode
        var client: RegistrationClient
        var registrar: DigestServer
        var timerGeneration = 0
        var states: [RegistrationClient.State] = []
        var registersSeen = 0
        var rng = SplitMix64(seed: 99)

        init(seed: UInt64, loss: Double, password: String) {
            sim = Simulation(seed: seed, conditions: NetworkConditions(loss: loss, duplication: 0.05, minimumDelay: .milliseconds(5), maximumDelay: .milliseconds(80)))
            uac = sim.addNode("uac")
            registrarNode = sim.addNode("registrar")
            let config = RegistrationClient.Configuration(registrar: try! SIPURI("sip:example.com"), addressOfRecord: try! SIPURI("sip:alice@example.com"),
                                                          contact: try! SIPURI("sip:alice@uac:5060"), expires: 600, viaSentBy: "uac:5060")
            client = RegistrationClient(configuration: config, credentials: DigestClient(username: "alice", password: password), seed: seed)
            registrar = DigestServer(configuration: .init(realm: "example.com", key: Array("k".utf8), nonceLifetime: 3600), store: DigestPasswordTable(["alice": "alicepw"]))
            registrarNode.onEvent = { [unowned self] node, e in
                guard case .request(let m, _, let id) = e else { return }
                self.registersSeen += 1
                let now = Int64(self.sim.now.components.seconds) + 1_000_000
                let response: SIPMessage
                switch self.registrar.verify(request: m, now: now) {
                case .authenticated:
                    var ok = SIPMessage(responseTo: m, statusCode: 200, toTag: "r")
                    if case .addresses(let a)? = try? m.contact(), let c = a.first { try! ok.append(.contact, c) }
                    response = ok
                case .stale:
                    response = self.challenge(m, now: now, stale: true)
                default:
                    response = self.challenge(m, now: now, stale: false)
                }
                node.respond(response, in: id)
            }
            uac.onEvent = { [unowned self] _, e in
                switch e {
                case .response(let m, _, _) where (m.statusCode ?? 0) >= 200: self.apply(self.client.handle(.response(m)))
                case .timeout: self.apply(self.client.handle(.timeout))
                case .transportError: self.apply(self.client.handle(.transportError))
                default: break
                }
            }
        }

        func challenge(_ m: SIPMessage, now: Int64, stale: Bool) -> SIPMessage {
            var r = SIPMessage(responseTo: m, statusCode: 401, toTag: "r")
            for c in registrar.challenges(now: now, stale: stale, using: &rng) { try! r.append(.wwwAuthenticate, c) }
            return r
        }

        func apply(_ actions: [RegistrationClient.Action]) {
            for a in actions {
                switch a {
                case .send(let m): uac.sendRequest(m, to: "registrar")
                case .startTimer(let d):
                    timerGeneration += 1
                    let g = timerGeneration
                    sim.schedule(after: d) { [unowned self] in
                        if self.timerGeneration == g { self.apply(self.client.handle(.timerFired)) }
                    }
                case .cancelTimer: timerGeneration += 1
                case .state(let s): states.append(s)
                }
            }
        }
    }

    @Test func staysRegisteredForHoursAtTwentyPercentLoss() {
        let h = Harness(seed: 7, loss: 0.2, password: "alicepw")
        h.apply(h.client.start())
        h.sim.run(until: .seconds(4 * 3600))
        #expect(h.client.state == .registered(expires: 600))
        // 4 h of 600 s bindings refreshed at 540 s: about 27 refreshes, each REGISTER seen once
        // per transaction (retransmissions absorbed) plus a challenge round now and then.
        let registrations = h.states.filter { $0 == .registered(expires: 600) }.count
        #expect(registrations >= 25 && registrations <= 30, "\(registrations) registrations")
        #expect(h.sim.lost > 10)
    }

    @Test func deadRegistrarFailsWithTimeoutsAndBacksOff() {
        let h = Harness(seed: 8, loss: 1.0, password: "alicepw")
        h.apply(h.client.start())
        h.sim.run(until: .seconds(3600))
        #expect(h.client.state == .failed(.timeout) || h.client.state == .registering)
        let failures = h.states.filter { $0 == .failed(.timeout) }.count
        // Timer F (32 s) plus waits of 15-30, 30-60, 60-120, … s: a handful of attempts an hour.
        #expect(failures >= 4 && failures <= 8, "\(failures) failures")
        #expect(h.registersSeen == 0)
    }

    @Test func wrongPasswordEndsInBadCredentials() {
        let h = Harness(seed: 9, loss: 0.0, password: "nope")
        h.apply(h.client.start())
        h.sim.run(until: .seconds(600))
        #expect(h.client.state == .failed(.badCredentials))
        #expect(h.registersSeen == 2)
    }
}
