import Synchronization
import SIPMessage
import SIPAuth
import SIPDialog
import SIPRuntime
import SIPTransport
import NetworkIO

/// Drives a ``RegistrationClient`` from a live ``SIPEndpoint``: its REGISTERs go out in
/// client transactions, their outcomes and the endpoint's timer come back as events. Behind
/// `switchboard register`.
public final class RegisterSession: Sendable {
    struct State {
        var client: RegistrationClient
        var timer: TimerService.Handle?
        var history: [RegistrationClient.State] = []
    }

    public let endpoint: SIPEndpoint
    public let registrar: SIPPeer
    private let state: Mutex<State>
    private let onState: @Sendable (RegistrationClient.State) -> Void

    /// - Parameters:
    ///   - registrar: the registrar's URI (its host must be numeric or resolvable by the caller).
    ///   - peer: where to send the REGISTERs.
    public init(endpoint: SIPEndpoint, peer: SIPPeer, registrar: SIPURI, addressOfRecord: SIPURI, username: String, password: String,
                expires: UInt32, seed: UInt64 = UInt64.random(in: 0...UInt64.max),
                onState: @escaping @Sendable (RegistrationClient.State) -> Void = { _ in }) {
        self.endpoint = endpoint
        self.registrar = peer
        let local = endpoint.localAddresses[0]
        let host = local.address.isIPv6 ? "[\(local.address.ipString)]" : local.address.ipString
        let contact = SIPURI(user: addressOfRecord.user, host: local.address.isIPv6 ? .ipv6(local.address.ipString) : .ipv4(local.address.ipString),
                             port: local.address.port,
                             parameters: local.transport == .udp ? [] : [SIPParameter(name: "transport", value: local.transport.viaToken.lowercased())])
        let config = RegistrationClient.Configuration(registrar: registrar, addressOfRecord: addressOfRecord, contact: contact, expires: expires,
                                                      viaTransport: local.transport.viaToken, viaSentBy: "\(host):\(local.address.port)")
        state = Mutex(State(client: RegistrationClient(configuration: config, credentials: DigestClient(username: username, password: password), seed: seed)))
        self.onState = onState
    }

    /// The current state.
    public var current: RegistrationClient.State { state.withLock { $0.client.state } }

    /// Every state the registration went through, in order.
    public var history: [RegistrationClient.State] { state.withLock { $0.history } }

    public func start() { apply(state.withLock { $0.client.start() }) }

    public func stop() { apply(state.withLock { $0.client.stop() }) }

    private func handle(_ event: RegistrationClient.Event) {
        apply(state.withLock { $0.client.handle(event) })
    }

    private func apply(_ actions: [RegistrationClient.Action]) {
        for a in actions {
            switch a {
            case .send(let m):
                endpoint.sendRequest(m, to: registrar) { [weak self] event in
                    switch event {
                    case .provisional: break
                    case .final(let r): self?.handle(.response(r))
                    case .timeout: self?.handle(.timeout)
                    case .transportError: self?.handle(.transportError)
                    }
                }
            case .startTimer(let d):
                let h = endpoint.timerService.schedule(after: d) { [weak self] in self?.handle(.timerFired) }
                let old = state.withLock { s -> TimerService.Handle? in defer { s.timer = h }; return s.timer }
                if let o = old { endpoint.timerService.cancel(o) }
            case .cancelTimer:
                if let h = state.withLock({ s -> TimerService.Handle? in defer { s.timer = nil }; return s.timer }) { endpoint.timerService.cancel(h) }
            case .state(let s):
                state.withLock { $0.history.append(s) }
                onState(s)
            }
        }
    }

    /// Waits (bounded) until the state satisfies `done`.
    public func wait(timeout: Duration, until done: @Sendable (RegistrationClient.State) -> Bool) async -> RegistrationClient.State {
        let clock = MonotonicClock(), deadline = clock.now + timeout
        while clock.now < deadline {
            let s = current
            if done(s) { return s }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return current
    }
}
