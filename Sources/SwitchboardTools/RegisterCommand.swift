import Synchronization
import SIPMessage
import SIPAuth
import SIPDialog
import SIPRuntime
import SIPTransport
import NetworkIO

import Logging

/// `switchboard register`: one address of record registered through a ``SIPUserAgent`` (the one
/// driver of ``RegistrationClient`` on a live endpoint), its states collected in order.
public final class RegisterSession: Sendable {
    /// The agent whose registration this is (its endpoint is bound at init).
    public let agent: SIPUserAgent
    /// Where the REGISTERs go.
    public let registrar: SIPPeer
    private let registrarURI: SIPURI
    private let expires: UInt32
    private let states = Box()
    private let task = Mutex<Task<Void, Never>?>(nil)

    /// The bound endpoint.
    public var endpoint: SIPEndpoint { agent.endpoint }

    /// - Parameters:
    ///   - listen: the local listen point (its transport carries the REGISTERs).
    ///   - peer: where to send the REGISTERs.
    ///   - registrar: the registrar's URI (the REGISTER's Request-URI).
    public init(listen: SIPEndpoint.ListenPoint, peer: SIPPeer, registrar: SIPURI, addressOfRecord: SIPURI, username: String, password: String,
                expires: UInt32, logger: Logger = .disabled, onState: @escaping @Sendable (RegistrationClient.State) -> Void = { _ in }) throws {
        agent = try SIPUserAgent(configuration: .init(endpoint: .init(listen: [listen], logger: logger), identity: addressOfRecord,
                                                      credentials: DigestClient(username: username, password: password), transport: listen.transport,
                                                      sessionTimer: nil))
        self.registrar = peer
        self.registrarURI = registrar
        self.expires = expires
        let t = Task { [agent, states] in
            for await e in agent.events {
                if case .registration(let st, _) = e {
                    states.list.withLock { $0.append(st) }
                    onState(st)
                }
            }
        }
        task.withLock { $0 = t }
    }

    /// The current state.
    /// Until the agent reports its first state, a started registration is `.registering` (the
    /// REGISTER is on its way), never a settled-looking `.unregistered`.
    public var current: RegistrationClient.State {
        states.list.withLock { $0.last } ?? (states.started.withLock { $0 } ? .registering : .unregistered)
    }

    /// Every state the registration went through, in order.
    public var history: [RegistrationClient.State] { states.list.withLock { $0 } }

    /// The states, shared with the task reading the agent's events.
    private final class Box: Sendable {
        let list = Mutex<[RegistrationClient.State]>([])
        let started = Mutex(false)
    }

    /// Sends the first REGISTER (refreshes follow by themselves).
    public func start() async {
        states.started.withLock { $0 = true }
        await agent.register(registrar: registrarURI, peer: registrar, expires: expires)
    }

    /// Removes the binding (REGISTER with Expires: 0).
    public func stop() async { await agent.unregister() }

    /// Closes the agent's sockets.
    public func close() {
        agent.close()
        task.withLock { $0?.cancel() }
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
