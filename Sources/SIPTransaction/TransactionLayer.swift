import SIPMessage

/// The transaction layer of RFC 3261 §17: creates transactions, matches incoming messages to
/// them, and turns their actions into outputs for a driver, which owns the sockets and the
/// clock. Generic over the driver's address type, so the same code runs on real sockets, on the
/// simulated network and in capture replay.
///
/// Handled here, so the transaction user need not: retransmissions, ACKs for non-2xx
/// responses, 100 Trying, 481 to a CANCEL that matches no INVITE, and 482 for merged requests.
///
/// The layer is `@inlinable`: a driver in another module (``SIPEndpoint`` with its `SIPPeer`)
/// gets it specialized for its address type, without generic metadata look-ups and witness
/// calls on every message.
public struct TransactionLayer<Address: Hashable & Sendable>: Sendable {
    /// What the driver must do, or tell the transaction user.
    public enum Output: Sendable {
        /// Send a message to an address.
        case send(SIPMessage, to: Address, transaction: TransactionID)
        /// Start (or restart) a timer; call ``TransactionLayer/timerFired(_:_:)`` when it fires.
        case startTimer(TransactionID, TransactionTimer, after: Duration)
        /// Cancel a timer.
        case cancelTimer(TransactionID, TransactionTimer)
        /// A new request for the TU, in a new server transaction; answer with ``TransactionLayer/respond(_:in:)``.
        case request(SIPMessage, from: Address, transaction: TransactionID)
        /// A CANCEL for the INVITE server transaction `invite` (RFC 3261 §9.2). The TU answers
        /// the CANCEL (200) in `transaction` and the INVITE (487) in `invite`.
        case cancel(SIPMessage, from: Address, transaction: TransactionID, invite: TransactionID)
        /// An ACK that belongs to no transaction: the ACK for a 2xx, for the dialog layer.
        case ack(SIPMessage, from: Address)
        /// A response for a client transaction.
        case response(SIPMessage, transaction: TransactionID)
        /// A response that matches no client transaction (RFC 3261 §18.1.2), for the core
        /// (a 2xx from another fork, to be ACKed and ended by the dialog layer).
        case strayResponse(SIPMessage, from: Address)
        /// The transaction timed out (Timer B, F or H).
        case timeout(TransactionID, TransactionTimer)
        /// The transport failed for the transaction.
        case transportError(TransactionID)
        /// The transaction ended; its remaining timers can be dropped.
        case terminated(TransactionID)
    }

    @usableFromInline
    enum Machine: Sendable {
        case inviteClient(InviteClientTransaction)
        case nonInviteClient(NonInviteClientTransaction)
        case inviteServer(InviteServerTransaction)
        case nonInviteServer(NonInviteServerTransaction)

        /// Feeds `client` to a client machine, or `server` to a server one, and returns what
        /// the machine asks for; nil when there is no event for this machine's side.
        @inlinable
        mutating func handle(client: ClientTransactionInput?, server: ServerTransactionInput?) -> [TransactionAction]? {
            // The transaction is moved out of the enum (`consume`), not copied: it is the only
            // reference to its storage while it runs, and it is put back on every path.
            switch consume self {
            case .inviteClient(var t):
                defer { self = .inviteClient(t) }
                guard let event = client else { return nil }
                return t.handle(event)
            case .nonInviteClient(var t):
                defer { self = .nonInviteClient(t) }
                guard let event = client else { return nil }
                return t.handle(event)
            case .inviteServer(var t):
                defer { self = .inviteServer(t) }
                guard let event = server else { return nil }
                return t.handle(event)
            case .nonInviteServer(var t):
                defer { self = .nonInviteServer(t) }
                guard let event = server else { return nil }
                return t.handle(event)
            }
        }

        /// Whether this is an INVITE server transaction with no response yet (moved out and
        /// back, as in `handle`, not copied). Inlinable, as the layer's own `awaitsTrying` is: a
        /// driver in another module calls it specialized, not through the generic layer (which
        /// looked up the table's metadata on every call).
        @inlinable
        mutating func awaitsTrying() -> Bool {
            switch consume self {
            case .inviteServer(let t):
                defer { self = .inviteServer(t) }
                return t.state == .proceeding && t.lastResponse == nil
            case let other:
                self = other
                return false
            }
        }
    }

    @usableFromInline
    struct Entry: Sendable {
        @usableFromInline var machine: Machine
        @usableFromInline var peer: Address
        @usableFromInline var clientKey: ClientKey?
        @usableFromInline var serverKey: ServerKey?
        @usableFromInline var mergeKey: MergeKey?

        @inlinable
        init(machine: Machine, peer: Address, clientKey: ClientKey? = nil, serverKey: ServerKey? = nil, mergeKey: MergeKey? = nil) {
            self.machine = machine
            self.peer = peer
            self.clientKey = clientKey
            self.serverKey = serverKey
            self.mergeKey = mergeKey
        }
    }

    public let timers: TransactionTimers
    /// The live transactions, in slots (see ``SlotMap``): a transaction's id is its slot and a
    /// sequence number, so it is found by indexing, without hashing, and an id whose slot was
    /// taken again since (a late timer) does not match.
    @usableFromInline var slots = SlotMap<Entry>()
    @usableFromInline var clientIndex: [ClientKey: TransactionID] = [:]
    @usableFromInline var serverIndex: [ServerKey: TransactionID] = [:]
    @usableFromInline var mergeIndex: [MergeKey: TransactionID] = [:]
    @usableFromInline var rng: SplitMix64

    /// Counters for tests and statistics.
    public struct Counters: Sendable, Hashable {
        public var clientTransactions = 0
        public var serverTransactions = 0
        public var retransmissionsAbsorbed = 0
        public var strayResponses = 0
        public var merged482 = 0
        public var unmatchedCancels = 0
    }
    @inlinable public var counters: Counters { _counters }
    @usableFromInline var _counters = Counters()

    /// Creates a layer. `seed` makes the tags of the responses the layer writes itself (481,
    /// 482) reproducible; by default it is random.
    public init(timers: TransactionTimers = .rfc3261, seed: UInt64 = UInt64.random(in: 0...UInt64.max)) {
        self.timers = timers
        rng = SplitMix64(seed: seed)
    }

    /// The number of live transactions.
    @inlinable public var count: Int { slots.count }

    /// Whether a transaction is alive.
    @inlinable public func contains(_ id: TransactionID) -> Bool { slot(of: id) != nil }

    /// The slot of a live transaction.
    @inlinable func slot(of id: TransactionID) -> Int? { slots.slot(of: id.rawValue) }

    /// Whether `id` is an INVITE server transaction still waiting for the TU's first response
    /// (its 100 Trying timer is due to run): a driver that starts that timer only after the TU
    /// has seen the request asks this first. `mutating` only to read the transaction where it
    /// lies in the table (reading it out would copy it).
    @inlinable public mutating func awaitsTrying(_ id: TransactionID) -> Bool {
        guard let s = slot(of: id) else { return false }
        return slots[slot: s]!.machine.awaitsTrying()
    }

    /// The state of a transaction, for tests and diagnostics.
    public func stateDescription(_ id: TransactionID) -> String? {
        guard let s = slot(of: id), let e = slots[slot: s] else { return nil }
        switch e.machine {
        case .inviteClient(let t): return "\(t.state)"
        case .nonInviteClient(let t): return "\(t.state)"
        case .inviteServer(let t): return "\(t.state)"
        case .nonInviteServer(let t): return "\(t.state)"
        }
    }

    /// A new RFC 3261 branch: the magic cookie and 64 random bits.
    public static func newBranch<R: RandomNumberGenerator>(using rng: inout R) -> String {
        branch(rng.next() as UInt64)
    }

    /// The magic cookie and `value` as 16 lowercase hex digits, written in place (one string of
    /// 23 bytes; no radix conversion, padding and concatenation of intermediate strings).
    static func branch(_ value: UInt64) -> String {
        String(unsafeUninitializedCapacity: 23) { b in
            var i = 0
            for c in Via.magicCookie.utf8 { b[i] = c; i += 1 }
            var shift = 60
            while shift >= 0 {
                let d = UInt8(truncatingIfNeeded: value >> UInt64(shift)) & 0xF
                b[i] = d < 10 ? 0x30 + d : 0x57 + d
                i += 1
                shift -= 4
            }
            return i
        }
    }

    /// A new branch from the system's random source.
    public static func newBranch() -> String {
        var g = SystemRandomNumberGenerator()
        return newBranch(using: &g)
    }

    /// An id for a new transaction (see ``SlotMap/allocateID()``): the caller stores the entry
    /// with ``store(_:_:)`` before it allocates another id.
    @inlinable mutating func allocateID() -> TransactionID { TransactionID(rawValue: slots.allocateID()) }

    /// Stores a new transaction's entry in the slot its id names.
    @inlinable mutating func store(_ id: TransactionID, _ entry: consuming Entry) { slots.store(entry, as: id.rawValue) }

    // MARK: Client side

    /// Starts a client transaction for `request` (its top Via must carry a branch), sending it
    /// to `destination`.
    @inlinable public mutating func sendRequest(_ request: SIPMessage, to destination: Address, reliable: Bool) -> (TransactionID, [Output]) {
        let id = allocateID()
        _counters.clientTransactions += 1
        let key = ClientKey(request: request)
        if request.method == .ack {
            // An ACK (for a 2xx) is not a transaction: just send it.
            return (id, [.send(request, to: destination, transaction: id)])
        }
        var entry: Entry
        let actions: [TransactionAction]
        if request.method == .invite {
            var t = InviteClientTransaction(request: request, reliable: reliable, timers: timers)
            actions = t.start()
            entry = Entry(machine: .inviteClient(t), peer: destination, clientKey: key)
        } else {
            var t = NonInviteClientTransaction(request: request, reliable: reliable, timers: timers)
            actions = t.start()
            entry = Entry(machine: .nonInviteClient(t), peer: destination, clientKey: key)
        }
        if let k = key { clientIndex[k] = id } else { entry.clientKey = nil }
        store(id, entry)
        return (id, outputs(for: id, actions))
    }

    // MARK: Server side

    /// Sends the TU's response in a server transaction.
    @inlinable public mutating func respond(_ response: SIPMessage, in id: TransactionID) -> [Output] {
        feed(id, client: nil, server: .send(response))
    }

    // MARK: Input

    /// Routes a message received from `source` over a transport that is `reliable` or not.
    @inlinable public mutating func receive(_ message: SIPMessage, from source: Address, reliable: Bool) -> [Output] {
        receive(message, from: source, reliable: reliable, topVia: nil)
    }

    /// ``receive(_:from:reliable:)`` with a request's ``SIPMessage/topViaParts`` when the caller
    /// has read them already (the endpoint does, to stamp the Via), so that the transaction key
    /// does not scan the Via again.
    @inlinable package mutating func receive(_ message: SIPMessage, from source: Address, reliable: Bool,
                                             topVia: SIPMessage.TopViaParts?) -> [Output] {
        if message.isRequest { return receiveRequest(message, from: source, reliable: reliable, topVia: topVia) }
        guard let key = ClientKey(response: message), let id = clientIndex[key], let i = slot(of: id) else {
            _counters.strayResponses += 1
            return [.strayResponse(message, from: source)]
        }
        // The machine is fed where it lies in the table (no copy of the entry and write-back).
        guard let actions = slots[slot: i]!.machine.handle(client: .response(message), server: nil) else { return [] }
        if actions.isEmpty { _counters.retransmissionsAbsorbed += 1 }
        return outputs(for: id, actions)
    }

    @inlinable mutating func receiveRequest(_ request: SIPMessage, from source: Address, reliable: Bool,
                                            topVia: SIPMessage.TopViaParts? = nil) -> [Output] {
        guard let method = request.method, let key = ServerKey(request: request, top: topVia) else { return [] }
        if let id = serverIndex[key], let i = slot(of: id) {
            // A retransmission, or the ACK for a non-2xx (or 2xx, RFC 6026) response.
            guard let actions = slots[slot: i]!.machine.handle(client: nil, server: .request(request)) else { return [] }
            if actions.isEmpty || actions.allSatisfy({ if case .transmit = $0 { return true } else { return false } }) {
                _counters.retransmissionsAbsorbed += 1
            }
            return outputs(for: id, actions, source: source)
        }
        if method == .ack {
            return [.ack(request, from: source)]
        }
        // A new server transaction. Its entry is built once, in place in the table (a local
        // entry stored afterwards was copied and destroyed through value witnesses).
        let id = allocateID()
        _counters.serverTransactions += 1
        var actions: [TransactionAction]
        let machine: Machine
        if method == .invite {
            var t = InviteServerTransaction(request: request, reliable: reliable, timers: timers)
            actions = t.start()
            machine = .inviteServer(consume t)
        } else {
            var t = NonInviteServerTransaction(request: request, reliable: reliable, timers: timers)
            actions = t.start()
            machine = .nonInviteServer(consume t)
        }
        let merge = MergeKey(request: request)
        // §8.2.2.2: the same request over another path is answered 482 in the new transaction.
        var merged = false
        if let mk = merge, let other = mergeIndex[mk], slot(of: other) != nil { merged = true }
        serverIndex[key] = id
        if merged {
            store(id, Entry(machine: machine, peer: source, serverKey: key))
            _counters.merged482 += 1
            return respondInternally(id, SIPMessage(responseTo: request, statusCode: 482, toTag: newTag()), dropping: actions)
        }
        if let mk = merge { mergeIndex[mk] = id }
        store(id, Entry(machine: machine, peer: source, serverKey: key, mergeKey: merge))
        if method == .cancel {
            guard let inviteKey = ServerKey(request: request, asMethod: .invite, top: topVia), let invite = serverIndex[inviteKey], slot(of: invite) != nil else {
                _counters.unmatchedCancels += 1
                return respondInternally(id, SIPMessage(responseTo: request, statusCode: 481, toTag: newTag()), dropping: actions)
            }
            actions.removeAll { if case .deliverRequest = $0 { return true } else { return false } }
            return [.cancel(request, from: source, transaction: id, invite: invite)] + outputs(for: id, actions)
        }
        return outputs(for: id, actions, source: source)
    }

    /// Answers in a fresh server transaction without telling the TU about the request.
    @inlinable mutating func respondInternally(_ id: TransactionID, _ response: SIPMessage, dropping actions: [TransactionAction]) -> [Output] {
        let kept = actions.filter { if case .deliverRequest = $0 { return false } else { return true } }
        return outputs(for: id, kept) + respond(response, in: id)
    }

    /// A To tag for responses the layer generates itself.
    @inlinable mutating func newTag() -> String {
        String(rng.next(), radix: 36)
    }

    /// A timer the driver started has fired.
    @inlinable public mutating func timerFired(_ id: TransactionID, _ timer: TransactionTimer) -> [Output] {
        feed(id, client: .timer(timer), server: .timer(timer))
    }

    /// The transport could not send for this transaction.
    @inlinable public mutating func transportFailed(_ id: TransactionID) -> [Output] {
        feed(id, client: .transportError, server: .transportError)
    }

    /// Feeds `client` or `server` to the transaction's machine, whichever its side takes, and
    /// turns what it asks for into outputs.
    @inlinable mutating func feed(_ id: TransactionID, client: ClientTransactionInput?, server: ServerTransactionInput?) -> [Output] {
        guard let i = slot(of: id), let actions = slots[slot: i]!.machine.handle(client: client, server: server) else { return [] }
        return outputs(for: id, actions)
    }

    @inlinable mutating func outputs(for id: TransactionID, _ actions: [TransactionAction], source: Address? = nil) -> [Output] {
        // Only the peer is read: through the slot's in-place accessor, since reading
        // `slots[slot: i]!.peer` may copy the whole entry first (every reference in it retained).
        guard let i = slot(of: id) else { return [] }
        let peer = Self.peer(of: &slots[slot: i]!)
        var out: [Output] = []
        out.reserveCapacity(actions.count)
        for a in actions {
            switch a {
            case .transmit(let m): out.append(.send(m, to: peer, transaction: id))
            case .startTimer(let t, let d): out.append(.startTimer(id, t, after: d))
            case .cancelTimer(let t): out.append(.cancelTimer(id, t))
            case .deliverResponse(let m): out.append(.response(m, transaction: id))
            case .deliverRequest(let m):
                if m.method == .ack { out.append(.ack(m, from: source ?? peer)) } else { out.append(.request(m, from: source ?? peer, transaction: id)) }
            case .timeout(let t): out.append(.timeout(id, t))
            case .transportError: out.append(.transportError(id))
            case .terminated:
                remove(id)
                out.append(.terminated(id))
            }
        }
        return out
    }

    @inlinable static func peer(of entry: inout Entry) -> Address { entry.peer }

    @inlinable mutating func remove(_ id: TransactionID) {
        guard let e = slots.remove(id.rawValue) else { return }
        if let k = e.clientKey, clientIndex[k] == id { clientIndex[k] = nil }
        if let k = e.serverKey, serverIndex[k] == id { serverIndex[k] = nil }
        if let k = e.mergeKey, mergeIndex[k] == id { mergeIndex[k] = nil }
    }
}
