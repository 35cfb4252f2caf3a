import Synchronization
import SIPMessage
import SIPAuth
import SIPDialog
import SIPRuntime
import SIPTransport

/// An identity a ``Phone`` speaks for: an address of record, its credentials, its registration
/// and how its calls are placed (Cloudonix's registration data, libSoftphone's and CallKit's
/// account, Twilio's access identity).
///
/// Every phone has one account, ``Phone/account``, made from the identity and credentials of
/// its `SIPUserAgent.Configuration`. ``Phone/addAccount(_:)`` adds more on the same sockets:
/// each registers on its own (its binding's Contact carries its user part, so the registrar
/// routes its calls back to it), places calls as itself (From, credentials for challenges,
/// its session token) and receives the incoming calls whose Request-URI names its user
/// (``Call/account``).
///
/// ```swift
/// let work = try phone.addAccount(.init(addressOfRecord: try SIPURI("sip:alice@work.example"),
///                                       credentials: DigestClient(username: "alice", password: "…"),
///                                       registrar: try SIPURI("sip:work.example")))
/// try await work.register()
/// for await state in work.registrationStates { print(state) }
/// let call = try await work.dial(try SIPURI("sip:bob@work.example"))
/// ```
public final class Account: Sendable, Identifiable, CustomStringConvertible {
    /// Whether an account registers.
    public enum Registration: Sendable, Hashable {
        /// REGISTER with this lifetime (seconds), refreshed before it lapses.
        case register(expires: UInt32)
        /// Registration-free: no REGISTER ever (Cloudonix's `WORKFLOW_TYPE_REGISTRATION_LESS`);
        /// calls are placed with a session token instead (``Configuration/sessionToken``), and
        /// ``Account/register(timeout:)`` throws ``RegistrationError/registrationFree``.
        case none
    }

    /// What an account is.
    public struct Configuration: Sendable {
        /// The address of record: From of its calls, To and From of its REGISTER.
        public var addressOfRecord: SIPURI
        /// The display name of its From.
        public var displayName: String?
        /// Credentials for the challenges of its REGISTERs and calls (nil: the phone's).
        public var credentials: DigestClient?
        /// The registrar's URI (the REGISTER's Request-URI); nil: the address of record's domain.
        public var registrar: SIPURI?
        /// Where the REGISTER goes when not to the registrar URI's own address (a registrar
        /// named by a domain and served elsewhere).
        public var registrarPeer: SIPPeer?
        /// Whether and how long it registers.
        public var registration: Registration
        /// A session token sent with every call of the account (registration-free dialing),
        /// unless the call's ``CallOptions/sessionToken`` gives another.
        public var sessionToken: String?
        /// The header the session token goes in (`Authorization: Bearer`, RFC 8898, by default).
        public var tokenHeader: SIPHeaderName

        /// An account for `addressOfRecord`.
        public init(addressOfRecord: SIPURI, displayName: String? = nil, credentials: DigestClient? = nil, registrar: SIPURI? = nil,
                    registrarPeer: SIPPeer? = nil, registration: Registration = .register(expires: 3600),
                    sessionToken: String? = nil, tokenHeader: SIPHeaderName = .authorization) {
            self.addressOfRecord = addressOfRecord
            self.displayName = displayName
            self.credentials = credentials
            self.registrar = registrar
            self.registrarPeer = registrarPeer
            self.registration = registration
            self.sessionToken = sessionToken
            self.tokenHeader = tokenHeader
        }

        /// The registrar's URI: ``registrar``, or `sip:` and the address of record's host and port.
        public var registrarURI: SIPURI {
            registrar ?? SIPURI(secure: addressOfRecord.secure, host: addressOfRecord.host, port: addressOfRecord.port)
        }
    }

    /// The registration's states (unregistered, registering, registered with its lifetime,
    /// unregistering, failed with its reason: bad credentials, forbidden, timeout, transport…).
    public typealias RegistrationState = RegistrationClient.State

    /// The account's number in its phone (the phone's own account is 0).
    public let id: Int
    /// The user part of the account's Contact: its address of record's user, or that with
    /// `-` and the account's number when another account of the phone has the same user (two
    /// providers' `alice`), so the calls each registrar sends back tell which account they are for.
    public let contactUser: String?
    /// What the account is.
    public let configuration: Configuration
    private weak let phone: Phone?
    private let agent: SIPUserAgent
    let broadcast = Broadcast(RegistrationClient.State.unregistered)
    /// The registration's states so far (bounded: the last 64).
    private let history = Mutex<[RegistrationClient.State]>([])

    init(id: Int, configuration: Configuration, contactUser: String?, phone: Phone, agent: SIPUserAgent) {
        self.id = id
        self.contactUser = contactUser
        self.configuration = configuration
        self.phone = phone
        self.agent = agent
    }

    public var description: String { "account \(id) (\(configuration.addressOfRecord))" }

    /// The address of record.
    public var addressOfRecord: SIPURI { configuration.addressOfRecord }

    /// Whether this is the phone's own account (``Phone/account``).
    public var isPrimary: Bool { id == 0 }

    /// The registration's state now.
    public var registrationState: RegistrationState { broadcast.current }

    /// The registration's states from now on: the current one first, then every change. Each
    /// access makes a new sequence; it finishes when the phone closes.
    public var registrationStates: AsyncStream<RegistrationState> { broadcast.subscribe() }

    /// The registration's states so far, oldest first (the last 64).
    public var registrationHistory: [RegistrationState] { history.withLock { $0 } }

    func publish(_ state: RegistrationState) {
        history.withLock {
            $0.append(state)
            if $0.count > 64 { $0.removeFirst($0.count - 64) }
        }
        broadcast.publish(state)
    }

    /// Registers with the configured registrar and lifetime and returns once registered; the
    /// binding is refreshed before it lapses, and a failed refresh is retried with backoff.
    /// Calling it again re-registers at once (after a network change, say).
    /// - Throws: ``RegistrationError/failed(_:)`` with the reason (bad credentials, 403,
    ///   unreachable…), ``RegistrationError/timedOut`` after `timeout`,
    ///   ``RegistrationError/registrationFree`` for an account configured not to register.
    public func register(timeout: Duration = .seconds(32)) async throws(RegistrationError) {
        guard case .register(let expires) = configuration.registration else { throw .registrationFree }
        try await register(with: configuration.registrarURI, peer: configuration.registrarPeer, expires: expires, timeout: timeout)
    }

    /// Registers with `registrar` (sent to `peer` when given) for `expires` seconds; see
    /// ``register(timeout:)``.
    public func register(with registrar: SIPURI, peer: SIPPeer? = nil, expires: UInt32 = 3600,
                         timeout: Duration = .seconds(32)) async throws(RegistrationError) {
        // Subscribed first: the outcome cannot pass unseen.
        let states = registrationStates
        await agent.register(registrar: registrar, peer: peer, expires: expires, as: isPrimary ? nil : configuration.addressOfRecord,
                             contactUser: contactUser, credentials: configuration.credentials)
        let outcome: RegistrationClient.State? = await within(timeout) {
            // The first value is the state before this attempt (an old failure, say): not its outcome.
            for await s in states.dropFirst() {
                switch s {
                case .registered, .failed: return s
                default: continue
                }
            }
            return nil
        }
        switch outcome {
        case .registered?: return
        case .failed(let why)?: throw .failed(why)
        default: throw .timedOut
        }
    }

    /// Removes the binding and returns once the registrar confirmed it (or after `timeout`);
    /// nothing when not registered.
    public func unregister(timeout: Duration = .seconds(32)) async {
        switch registrationState {
        case .registered, .registering, .failed: break
        case .unregistered, .unregistering: return
        }
        let states = registrationStates
        await agent.unregister(isPrimary ? nil : configuration.addressOfRecord)
        _ = await within(timeout) {
            // Unregistered, or failed (the binding then lapses at the registrar).
            for await s in states.dropFirst() where s.isSettled && !(s.isRegistered) { return true }
            return nil
        }
    }

    /// Places a call as this account: its address of record in From, its credentials for the
    /// challenges, its session token unless `options` has one. See ``Phone/dial(_:options:)``.
    /// - Throws: ``CallDataError/tooLarge(_:)`` when the options' data is too large,
    ///   ``CallDataError/phoneClosed`` when the phone is gone.
    public func dial(_ target: SIPURI, options: CallOptions = CallOptions()) async throws(CallDataError) -> Call {
        guard let phone else { throw .phoneClosed }
        var options = options
        if options.sessionToken == nil, let token = configuration.sessionToken {
            options.sessionToken = token
            options.tokenHeader = configuration.tokenHeader
        }
        return try await phone.dial(target, options: options, account: self)
    }

    /// The From of the account's calls.
    var identity: NameAddress { NameAddress(displayName: configuration.displayName, uri: configuration.addressOfRecord) }

    /// The key of the account's address of record among the phone's accounts (user and host).
    var key: String { SIPUserAgent.registrationKey(configuration.addressOfRecord) }
}

/// Why an account could not be added.
public enum AccountError: Error, Sendable, Hashable {
    /// The phone already has an account with this address of record (user and host).
    case duplicate(SIPURI)
}
