import SIPMessage
import SIPAuth
import SIPTransaction

/// Identifies an INVITE session at one user agent: its Call-ID and our tag.
public struct SessionKey: Hashable, Sendable, CustomStringConvertible {
    public var callID: String
    public var localTag: String

    public init(callID: String, localTag: String) {
        self.callID = callID
        self.localTag = localTag
    }

    public var description: String { "\(callID);tag=\(localTag)" }

    /// The tags first: ours are short (the String holds them inline, compared as two words),
    /// and tables look keys up by probing their neighbours, whose tags differ; a Call-ID is
    /// compared only when the tags match.
    public static func == (a: SessionKey, b: SessionKey) -> Bool {
        a.localTag == b.localTag && a.callID == b.callID
    }

    /// Hashes the Call-ID only: it tells a user agent's sessions apart (several sessions share
    /// one only when a call forks), and keys are hashed several times per message (the session
    /// table, the timers of each session), so the tag's hashing is saved. Equal keys have equal
    /// Call-IDs, so equal hashes.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(callID)
    }

    /// A table's hash of the key (see ``hash(into:)``: the Call-ID only), without SipHash: the
    /// tables of a user agent look a call's key up some thirty times per call, and SipHash was
    /// most of each look-up. The Call-ID's bytes are folded eight at a time, each word mixed
    /// with the table's seed and the previous words by a full-width multiplication with a
    /// secret drawn at random when the process starts, as keyed hashes for hash tables do: a
    /// peer that chooses Call-IDs cannot know which of them collide.
    public func _rawHashValue(seed: Int) -> Int {
        let folded = callID.utf8.withContiguousStorageIfAvailable { Self.fold(UnsafeRawBufferPointer($0), seed: seed) }
        if let folded { return folded }
        var copy = callID
        return copy.withUTF8 { Self.fold(UnsafeRawBufferPointer($0), seed: seed) }
    }

    /// The process's secrets for ``_rawHashValue(seed:)`` (odd multipliers).
    private static let secrets: (UInt64, UInt64) = {
        var g = SystemRandomNumberGenerator()
        return (g.next() | 1, g.next() | 1)
    }()

    private static func mix(_ a: UInt64, _ b: UInt64) -> UInt64 {
        let p = a.multipliedFullWidth(by: b)
        return p.high ^ p.low
    }

    private static func fold(_ bytes: UnsafeRawBufferPointer, seed: Int) -> Int {
        let (k0, k1) = secrets
        var h = mix(UInt64(UInt(bitPattern: seed)) ^ k0, k1 ^ UInt64(bytes.count))
        guard bytes.count >= 8 else {
            var last: UInt64 = 0
            for j in 0..<bytes.count { last |= UInt64(bytes[j]) << UInt64(8 * j) }
            return Int(truncatingIfNeeded: mix(mix(h ^ last, k1), k0))
        }
        var i = 0
        while i + 8 <= bytes.count {
            h = mix(h ^ UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)), k1)
            i += 8
        }
        // The last bytes as the word that ends with them (it overlaps the one before).
        if i < bytes.count {
            h = mix(h ^ UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: bytes.count - 8, as: UInt64.self)), k1)
        }
        return Int(truncatingIfNeeded: mix(h, k0))
    }
}

/// The INVITE sessions of one user agent and the routing between them and the transaction
/// layer, with no I/O: what arrives from the transaction layer goes to the right session (by
/// Call-ID and tag, by the INVITE transaction a CANCEL matched, by the client transaction that
/// failed), new INVITEs make new sessions, requests for no session get 481. The runtimes (live
/// sockets, the simulated network, capture replay) drive it the same way.
public struct SessionManager: Sendable {
    /// What the driver must do.
    public enum Output: Sendable {
        /// An action of one session (see ``InviteSession/Action``).
        case session(SessionKey, InviteSession.Action)
        /// A response that belongs to no session (481, 405…), in a server transaction.
        case respond(SIPMessage, in: TransactionID)
        /// A new incoming call, after the session's own actions (its state is `.incoming`, the
        /// offer was passed up). An INVITE the session refused at once (420, 421, 422, 400)
        /// produces only the refusal.
        case incomingCall(SessionKey, SIPMessage)
        /// A request outside any dialog that is not an INVITE (OPTIONS, MESSAGE, REGISTER…),
        /// for the user (answer it with ``respond``).
        case request(SIPMessage, transaction: TransactionID)
    }

    /// One session in the table, boxed: an ``InviteSession`` is about 2 KB inline and a hash
    /// table keeps up to 2⅔ slots per entry, so a table of sessions by value would cost several
    /// KB per dialog. Copy-on-write: a box is mutated only when this manager holds the only
    /// reference (see `slot(_:)`), so copies of a manager stay independent.
    final class Slot: @unchecked Sendable {
        var session: InviteSession
        /// The INVITE server transaction that created the session (UAS), for CANCEL.
        var inviteTransaction: TransactionID?

        init(_ session: InviteSession, inviteTransaction: TransactionID?) {
            self.session = session
            self.inviteTransaction = inviteTransaction
        }
    }

    public var configuration: InviteSessionConfiguration {
        didSet { sharedConfiguration = SharedConfiguration(configuration) }
    }
    /// One copy of ``configuration`` for all the sessions made with it.
    private var sharedConfiguration: SharedConfiguration
    private var sessions: [SessionKey: Slot] = [:]
    private var byInviteTransaction: [TransactionID: SessionKey] = [:]
    private var byClientTransaction: [TransactionID: (key: SessionKey, method: SIPMethod, cseq: UInt32)] = [:]
    private var rng: SplitMix64
    private let credentials: DigestClient?
    /// Whether new INVITEs are taken (otherwise they get 480).
    public var acceptsCalls = true

    public init(configuration: InviteSessionConfiguration, credentials: DigestClient? = nil, seed: UInt64) {
        self.configuration = configuration
        sharedConfiguration = SharedConfiguration(configuration)
        self.credentials = credentials
        rng = SplitMix64(seed: seed)
    }

    /// The live sessions.
    public var keys: [SessionKey] { Array(sessions.keys) }
    public var count: Int { sessions.count }
    public subscript(key: SessionKey) -> InviteSession? { sessions[key]?.session }
    /// A session's state, read in place (the subscript copies the whole session).
    public func state(of key: SessionKey) -> SessionState? { sessions[key]?.session.state }
    /// A session's ``InviteSession/remoteBody``, read in place.
    public func remoteBody(of key: SessionKey) -> SessionBody? { sessions[key]?.session.remoteBody }

    // MARK: Commands

    /// Starts a call to `target`, with `offer` (or none: a delayed offer).
    public mutating func call(_ target: NameAddress, offer: SessionBody?, configuration override: InviteSessionConfiguration? = nil,
                              credentials override2: DigestClient? = nil, headers: [(SIPHeaderName, String)] = []) -> (SessionKey, [Output]) {
        var s = InviteSession(calling: target, shared: override.map(SharedConfiguration.init) ?? sharedConfiguration, offer: offer,
                              credentials: override2 ?? credentials, seed: rng.next())
        s.addInitialHeaders(headers)
        let key = SessionKey(callID: s.callID, localTag: s.localTag)
        let actions = s.start()
        let slot = Slot(s, inviteTransaction: nil)
        sessions[key] = slot
        return (key, wrap(key, actions, slot))
    }

    /// Our address changed: new sessions and every session now use a Contact and Via sent-by at
    /// `host`:`port` (see ``InviteSession/relocate(host:port:viaSentBy:)``).
    public mutating func relocate(host: SIPHost, port: UInt16?, viaSentBy: String) {
        configuration.relocate(host: host, port: port, viaSentBy: viaSentBy)
        for slot in sessions.values { slot.session.relocate(host: host, port: port, viaSentBy: viaSentBy) }
    }

    /// Runs a command on one session (answer, hold, hang up…). Unknown key: nothing.
    public mutating func perform(_ key: SessionKey, _ body: (inout InviteSession) throws(SessionError) -> [InviteSession.Action]) throws(SessionError) -> [Output] {
        guard let slot = slot(key) else { return [] }
        // On a copy, so that a command that throws leaves the session as it was.
        var s = slot.session
        let actions = try body(&s)
        slot.session = s
        return wrap(key, actions, slot)
    }

    /// Runs one of the session's own commands (``InviteSession/provisional(_:body:)``,
    /// ``InviteSession/accept(body:)``, ``InviteSession/reject(_:reason:headers:)``) on the
    /// stored session, without the copy ``perform(_:_:)`` makes: those commands check their
    /// preconditions before they change anything, so one that throws leaves the session as it
    /// was. A command that could throw after a change must go through ``perform(_:_:)``.
    package mutating func performInPlace(_ key: SessionKey, _ body: (inout InviteSession) throws(SessionError) -> [InviteSession.Action]) throws(SessionError) -> [Output] {
        // In two steps: `outputs` named first would hold a copy of the manager (of its table)
        // while the session is mutated, and the session would be copied out of its shared box.
        let actions = try actionsInPlace(key, body)
        return Self.outputs(key, actions)
    }

    /// ``performInPlace(_:_:)`` for a driver that takes the session's actions as they are (all
    /// of them for `key`): no outputs to build, each repeating the key.
    package mutating func actionsInPlace(_ key: SessionKey, _ body: (inout InviteSession) throws(SessionError) -> [InviteSession.Action]) throws(SessionError) -> [InviteSession.Action] {
        guard let slot = slot(key) else { return [] }
        let actions = try body(&slot.session)
        retireIfTerminated(key, slot)
        return actions
    }

    /// Tells the manager which client transaction carries a request a session sent, so its
    /// failure can be routed back.
    public mutating func clientTransactionStarted(_ id: TransactionID, for key: SessionKey, request: SIPMessage) {
        guard let method = request.method, method != .ack, let seq = try? request.cseq().sequence else { return }
        byClientTransaction[id] = (key, method, seq)
    }

    /// A client transaction ended: forget it.
    public mutating func transactionTerminated(_ id: TransactionID) {
        byClientTransaction[id] = nil
        if let key = byInviteTransaction.removeValue(forKey: id), let slot = slot(key) { slot.inviteTransaction = nil }
    }

    // MARK: Inputs from the transaction layer

    /// A new request in a server transaction.
    public mutating func request(_ m: SIPMessage, transaction tx: TransactionID) -> [Output] {
        guard let method = m.method else { return [] }
        if let key = dialogKey(of: m) {
            guard let slot = slot(key) else {
                return [.respond(SIPMessage(responseTo: m, statusCode: 481), in: tx)]
            }
            return wrap(key, slot.session.handle(.request(m, transaction: tx)), slot)
        }
        guard method == .invite else { return [.request(m, transaction: tx)] }
        guard acceptsCalls else { return [.respond(SIPMessage(responseTo: m, statusCode: 480, toTag: String(rng.next(), radix: 36)), in: tx)] }
        let (key, actions, incoming) = startSession(m, transaction: tx)
        return Self.outputs(key, actions, then: incoming ? .incomingCall(key, m) : nil)
    }

    /// ``request(_:transaction:)`` for a driver that takes the session's actions as they are,
    /// when the request is an INVITE that makes a session (no To tag, calls taken): the new
    /// session's key, its actions, and whether it is an incoming call (false when the session
    /// refused the INVITE at once: only the refusal). Nil for any other request
    /// (``request(_:transaction:)`` then handles it).
    package mutating func newSessionActions(_ m: SIPMessage, transaction tx: TransactionID) -> (key: SessionKey, actions: [InviteSession.Action], incoming: Bool)? {
        guard m.method == .invite, acceptsCalls, m.toTagBytes == nil else { return nil }
        return startSession(m, transaction: tx)
    }

    /// A new session for the INVITE `m`, started; one refused at once has left the table.
    private mutating func startSession(_ m: SIPMessage, transaction tx: TransactionID) -> (key: SessionKey, actions: [InviteSession.Action], incoming: Bool) {
        // Made in its box and started there (a session is about 2 KB: no copies of it).
        let slot = Slot(InviteSession(incoming: m, transaction: tx, shared: sharedConfiguration, credentials: credentials, seed: rng.next()),
                        inviteTransaction: tx)
        let key = SessionKey(callID: slot.session.callID, localTag: slot.session.localTag)
        let actions = slot.session.start()
        byInviteTransaction[tx] = key
        sessions[key] = slot
        let refused = slot.session.isTerminated
        retireIfTerminated(key, slot)
        return (key, actions, !refused)
    }

    /// ``request(_:transaction:)`` for a driver that takes the session's actions as they are,
    /// when the request is for a session's dialog: the session's key and its actions. Nil when
    /// the request is for no live session (``request(_:transaction:)`` then answers it).
    package mutating func inDialogActions(_ m: SIPMessage, transaction tx: TransactionID) -> (SessionKey, [InviteSession.Action])? {
        guard m.method != nil, let key = dialogKey(of: m), let slot = slot(key) else { return nil }
        let actions = slot.session.handle(.request(m, transaction: tx))
        retireIfTerminated(key, slot)
        return (key, actions)
    }

    /// The key of the session a request with a To tag is for (an in-dialog request, an ACK).
    /// An initial INVITE (no To tag, the usual case) builds no Call-ID String here.
    private func dialogKey(of m: SIPMessage) -> SessionKey? {
        guard let toTag = m.toTagBytes, let callID = m.callID else { return nil }
        return SessionKey(callID: callID, localTag: String(decoding: toTag, as: UTF8.self))
    }

    /// A CANCEL matched to the INVITE server transaction `invite`.
    public mutating func cancel(_ m: SIPMessage, transaction tx: TransactionID, invite: TransactionID) -> [Output] {
        guard let key = byInviteTransaction[invite] else {
            return [.respond(SIPMessage(responseTo: m, statusCode: 481), in: tx)]
        }
        return feed(key, .cancel(m, transaction: tx))
    }

    /// An ACK for a 2xx (no transaction).
    public mutating func ack(_ m: SIPMessage) -> [Output] {
        guard let (key, actions) = ackActions(m) else { return [] }
        return Self.outputs(key, actions)
    }

    /// ``ack(_:)`` for a driver that takes the session's actions as they are: the session's key
    /// and its actions, or nil when the ACK is for no session.
    package mutating func ackActions(_ m: SIPMessage) -> (SessionKey, [InviteSession.Action])? {
        guard let key = dialogKey(of: m), let slot = slot(key) else { return nil }
        let actions = slot.session.handle(.ack(m))
        retireIfTerminated(key, slot)
        return (key, actions)
    }

    /// A response for one of our client transactions, or one that matched none.
    public mutating func response(_ m: SIPMessage) -> [Output] {
        guard let callID = m.callID, let fromTag = m.fromTag else { return [] }
        return feed(SessionKey(callID: callID, localTag: fromTag), .response(m))
    }

    /// A client transaction timed out or its transport failed.
    public mutating func clientTransactionFailed(_ id: TransactionID, timeout: Bool) -> [Output] {
        guard let t = byClientTransaction.removeValue(forKey: id) else { return [] }
        return feed(t.key, .requestFailed(t.method, cseq: t.cseq, timeout: timeout))
    }

    /// A server transaction ended on a transport error or Timer H: the session whose INVITE it
    /// carried hears of it (an unanswered INVITE that can no longer be answered ends its call).
    public mutating func serverTransactionFailed(_ id: TransactionID, timeout: Bool) -> [Output] {
        guard let key = byInviteTransaction[id] else { return [] }
        return feed(key, .serverTransactionFailed(id, timeout: timeout))
    }

    /// A session timer fired.
    public mutating func timerFired(_ key: SessionKey, _ timer: SessionTimer) -> [Output] {
        feed(key, .timerFired(timer))
    }

    // MARK: Internals

    private mutating func feed(_ key: SessionKey, _ input: InviteSession.Input) -> [Output] {
        guard let slot = slot(key) else { return [] }
        let actions = slot.session.handle(input)
        return wrap(key, actions, slot)
    }

    /// The box of a session, ready to be mutated: copied first when another copy of the
    /// manager shares it.
    private mutating func slot(_ key: SessionKey) -> Slot? {
        guard let i = sessions.index(forKey: key) else { return nil }
        if !isKnownUniquelyReferenced(&sessions.values[i]) {
            let shared = sessions.values[i]
            sessions.values[i] = Slot(shared.session, inviteTransaction: shared.inviteTransaction)
        }
        return sessions.values[i]
    }

    /// The session's actions as outputs; a session that ended leaves the table. `slot` is the
    /// session's box in the table (found by the caller: no second look-up by key).
    /// `then` goes after the session's actions.
    private mutating func wrap(_ key: SessionKey, _ actions: consuming [InviteSession.Action], _ slot: Slot, then last: Output? = nil) -> [Output] {
        retireIfTerminated(key, slot)
        return Self.outputs(key, actions, then: last)
    }

    /// A session that ended leaves the table.
    private mutating func retireIfTerminated(_ key: SessionKey, _ slot: Slot) {
        if slot.session.isTerminated {
            sessions[key] = nil
            if let tx = slot.inviteTransaction { byInviteTransaction[tx] = nil }
        }
    }

    /// The session's actions as outputs, `then` after them.
    private static func outputs(_ key: SessionKey, _ actions: consuming [InviteSession.Action], then last: Output? = nil) -> [Output] {
        // The actions are moved into the outputs, not copied (a copy retains each message's
        // buffers, and the actions' array would release them again).
        var actions = actions
        var out: [Output] = []
        out.reserveCapacity(actions.count + (last == nil ? 0 : 1))
        // Reversed in place through the buffer (bitwise swaps: the array's own reverse() swaps
        // through copies), then popped from the end.
        actions.withUnsafeMutableBufferPointer { $0.reverse() }
        while let a = actions.popLast() { out.append(.session(key, a)) }
        if let last { out.append(last) }
        return out
    }
}
