import SIPMessage

/// Identifies a dialog (RFC 3261 §12): Call-ID, local tag and remote tag, as seen from this
/// side.
public struct DialogID: Hashable, Sendable, CustomStringConvertible {
    public var callID: String
    public var localTag: String
    public var remoteTag: String

    public init(callID: String, localTag: String, remoteTag: String) {
        self.callID = callID
        self.localTag = localTag
        self.remoteTag = remoteTag
    }

    /// The ID of the dialog an incoming request belongs to, from the UAS side of it (the To tag
    /// is ours, the From tag the peer's); `nil` outside a dialog.
    public init?(incoming request: SIPMessage) {
        guard let id = request.callID, let to = request.toTag, let from = request.fromTag else { return nil }
        self.init(callID: id, localTag: to, remoteTag: from)
    }

    /// Whether an incoming request belongs to this dialog, seen from its UAS side: what
    /// `DialogID(incoming: request) == self` tells, compared on the header bytes (no String
    /// is built per request).
    public func matches(incoming request: SIPMessage) -> Bool {
        guard let id = request.callIDBytes, let to = request.toTagBytes, let from = request.fromTagBytes else { return false }
        return Self.same(id, callID) && Self.same(to, localTag) && Self.same(from, remoteTag)
    }

    /// Whether the bytes are the string's UTF-8, compared as two buffers (the generic
    /// `elementsEqual` over a `String.UTF8View` steps through it a byte at a time); lengths
    /// first, the string's stored count.
    static func same(_ bytes: ArraySlice<UInt8>, _ text: String) -> Bool {
        let utf8 = text.utf8
        guard bytes.count == utf8.count else { return false }
        let equal = utf8.withContiguousStorageIfAvailable { u in
            bytes.withUnsafeBufferPointer { b in
                var i = 0
                while i < b.count {
                    if b[i] != u[i] { return false }
                    i += 1
                }
                return true
            }
        }
        return equal ?? bytes.elementsEqual(utf8)
    }

    /// The ID of the dialog a response to our request belongs to (From tag ours, To tag theirs).
    public init?(response: SIPMessage) {
        guard let id = response.callID, let from = response.fromTag, let to = response.toTag else { return nil }
        self.init(callID: id, localTag: from, remoteTag: to)
    }

    public var description: String { "\(callID);local=\(localTag);remote=\(remoteTag)" }
}

/// Why a dialog could not be made or a request was refused.
public enum DialogError: Error, Sendable, Hashable {
    /// The message lacks what a dialog needs (a tag, a Contact, a CSeq…).
    case missing(String)
    /// A header needed by the dialog does not parse.
    case malformed(SIPParseError)
    /// RFC 3261 §12.2.2: a request whose CSeq is lower than the last one received (answer 500).
    case outOfOrder(received: UInt32, last: UInt32)
    /// The request does not belong to this dialog (answer 481).
    case notThisDialog
}

extension DialogError {
    /// The dialog error for a failure while reading the headers a dialog is built from: a
    /// header that does not parse is ``malformed(_:)``, a ``DialogError`` stays as it is, and
    /// anything else is reported as ``missing(_:)``.
    init(reading error: any Error) {
        switch error {
        case let e as SIPParseError: self = .malformed(e)
        case let e as DialogError: self = e
        default: self = .missing("\(error)")
        }
    }
}

/// The state of one dialog (RFC 3261 §12), a value type with no I/O: created from the
/// dialog-forming request and a response, it builds the requests sent inside the dialog and
/// checks the requests received.
///
/// The two parties, the remote target and the route set are kept as written in the messages
/// they come from (header values, a URI), not decoded: a dialog's requests copy them as they
/// are, and ``localParty``, ``remoteParty``, ``remoteTarget`` and ``routeSet`` decode them
/// when read.
public struct Dialog: Sendable, Hashable {
    public enum State: Sendable, Hashable { case early, confirmed, terminated }

    public private(set) var id: DialogID
    public private(set) var state: State
    /// Our From value, with our tag, as written.
    private var localPartyText: String
    /// The peer's address with its tag (the To of our requests), as written.
    private var remotePartyText: String
    /// The Request-URI of our requests (the peer's Contact URI), as written.
    private var remoteTargetText: String
    /// The route set's addresses as written, in the order our requests carry them.
    private var routeTexts: [String]
    /// The CSeq of our last request in the dialog; `nil` until we send one (UAS).
    public private(set) var localSequence: UInt32?
    /// The CSeq of the peer's last request; `nil` until one arrives (UAC).
    public private(set) var remoteSequence: UInt32?
    /// Whether the dialog is secure (a SIPS Request-URI over TLS).
    public let secure: Bool
    /// Whether we created the dialog by sending the request.
    public let isUAC: Bool
    /// Whether ``remoteTarget`` came from the peer's Contact: false only for an early dialog
    /// whose 1xx had none (``init(uacRequest:provisionalWithoutContact:)``) until one arrives.
    public private(set) var targetFromContact = true

    /// Our URI and tag (From of our requests).
    public var localParty: NameAddress { Self.address(localPartyText) }
    /// The peer's URI (To of our requests), with its tag.
    public var remoteParty: NameAddress { Self.address(remotePartyText) }
    /// The peer's Contact: the Request-URI of our requests (§12.1.1/§12.1.2).
    public var remoteTarget: URI { (try? URI(remoteTargetText)) ?? .other(scheme: "sip", text: remoteTargetText) }
    /// The route set, in the order our requests carry it.
    public var routeSet: [NameAddress] { routeTexts.map(Self.address) }

    /// A kept address decoded. Every address a dialog keeps decoded when the dialog took it
    /// (checked there, or by ``SIPMessage/validate()`` before), so the fallback is not reached.
    private static func address(_ text: String) -> NameAddress {
        (try? NameAddress(text)) ?? NameAddress(uri: .other(scheme: "sip", text: text))
    }

    // MARK: Creation

    /// A dialog created by our request and the peer's response with a To tag (§12.1.2): a 1xx
    /// makes it early, a 2xx confirmed. The route set is the response's Record-Route reversed.
    public init(uacRequest request: SIPMessage, response: SIPMessage) throws(DialogError) {
        try self.init(uacRequest: request, response: response, decoding: true)
    }

    /// ``init(uacRequest:response:)``; with `decoding` false the From, To and Contact are
    /// taken as written, not decoded again: for a request of ours and a response the
    /// transaction layer validated (``SIPMessage/validate()`` decodes every one of them). A
    /// `callID` equal to the response's is kept as the dialog's (one string for the session
    /// and its dialog).
    package init(uacRequest request: SIPMessage, response: SIPMessage, decoding: Bool, callID: String? = nil) throws(DialogError) {
        guard let code = response.statusCode, (101..<300).contains(code) else { throw .missing("a 101-299 response") }
        guard let theirs = response.callIDBytes, let localTag = response.fromTag, let remoteTag = response.toTag else {
            throw .missing("From tag, To tag and Call-ID")
        }
        let dialogID = DialogID(callID: Self.callID(theirs, known: callID), localTag: localTag, remoteTag: remoteTag)
        do {
            localPartyText = try Self.party(.from, of: request, decoding: decoding)
            remotePartyText = try Self.party(.to, of: response, decoding: decoding)
            routeTexts = try Self.routes(of: response, decoding: decoding).reversed()
            let cs = try request.cseq()
            localSequence = cs.sequence
            guard let target = try Self.target(of: response, decoding: decoding) else {
                throw DialogError.missing("Contact in the response")
            }
            remoteTargetText = target
            secure = try request.requestURIIsSIPS()
        } catch {
            throw DialogError(reading: error)
        }
        id = dialogID
        state = code < 200 ? .early : .confirmed
        remoteSequence = nil
        isUAC = true
    }

    /// An early dialog from a tagged 1xx that carries no Contact, which RFC 3261 §12.1.2 expects
    /// (linphonec 5.1's 180 Ringing has none): its remote target is our INVITE's Request-URI
    /// until a response brings a Contact (a 2xx must: see ``targetFromContact``). It lets the
    /// early dialog be named by its tags (a Replaces of RFC 3891 naming the call we placed) and
    /// ended; a response with a Contact, or no 101-199 with a To tag, throws.
    public init(uacRequest request: SIPMessage, provisionalWithoutContact response: SIPMessage) throws(DialogError) {
        guard let code = response.statusCode, (101..<200).contains(code) else { throw .missing("a 101-199 response") }
        var withTarget = response
        do {
            guard case .none = try response.contact() else { throw DialogError.missing("a 1xx without Contact") }
            try withTarget.append(.contact, "<\(try request.requestURI())>")
        } catch {
            throw DialogError(reading: error)
        }
        try self.init(uacRequest: request, response: withTarget)
        targetFromContact = false
    }

    /// A dialog created by the peer's request and our response carrying our To tag (§12.1.1).
    /// The route set is the request's Record-Route in order; the remote sequence is its CSeq.
    public init(uasRequest request: SIPMessage, response: SIPMessage) throws(DialogError) {
        try self.init(uasRequest: request, response: response, decoding: true)
    }

    /// ``init(uasRequest:response:)``; with `decoding` false the From, To and Contact are
    /// taken as written, not decoded again: for a request the transaction layer validated
    /// (``SIPMessage/validate()`` decodes every one of them) and our own response to it.
    package init(uasRequest request: SIPMessage, response: SIPMessage, decoding: Bool, callID known: String? = nil) throws(DialogError) {
        guard let code = response.statusCode, (101..<300).contains(code) else { throw .missing("a 101-299 response") }
        guard let theirs = request.callIDBytes, let remoteTag = request.fromTag, let localTag = response.toTag else {
            throw .missing("Call-ID, From tag and our To tag")
        }
        let callID = Self.callID(theirs, known: known)
        do {
            localPartyText = try Self.party(.to, of: response, decoding: decoding)
            remotePartyText = try Self.party(.from, of: request, decoding: decoding)
            routeTexts = try Self.routes(of: request, decoding: decoding)
            remoteSequence = try request.cseq().sequence
            guard let target = try Self.target(of: request, decoding: decoding) else { throw DialogError.missing("Contact in the request") }
            remoteTargetText = target
            secure = try request.requestURIIsSIPS()
        } catch {
            throw DialogError(reading: error)
        }
        id = DialogID(callID: callID, localTag: localTag, remoteTag: remoteTag)
        state = code < 200 ? .early : .confirmed
        localSequence = nil
        isUAC = false
    }

    /// The Record-Route addresses of `message` as written, in order; with `decoding`, decoded
    /// first (throwing what ``SIPMessage/recordRoute()`` throws).
    private static func routes(of message: SIPMessage, decoding: Bool) throws(SIPParseError) -> [String] {
        // Most dialogs have none: no list of lines built for them.
        guard message.firstValueBytes(.recordRoute) != nil else { return [] }
        var out: [String] = []
        for line in message.valueBytes(.recordRoute) {
            var start = line.startIndex, i = start, quoted = false, bracketed = false
            while i <= line.endIndex {
                let x = i < line.endIndex ? line[i] : UInt8(ascii: ",")
                if quoted {
                    if x == UInt8(ascii: "\\") { i += 1 } else if x == UInt8(ascii: "\"") { quoted = false }
                } else if x == UInt8(ascii: "\"") {
                    quoted = true
                } else if x == UInt8(ascii: "<") {
                    bracketed = true
                } else if x == UInt8(ascii: ">") {
                    bracketed = false
                } else if x == UInt8(ascii: ","), !bracketed {
                    let element = line[start..<min(i, line.endIndex)].drop { $0 == 0x20 || $0 == 0x09 }
                    let end = element.lastIndex { $0 != 0x20 && $0 != 0x09 }.map { $0 + 1 } ?? element.startIndex
                    if end > element.startIndex { out.append(String(decoding: element[..<end], as: UTF8.self)) }
                    start = i + 1
                }
                i += 1
            }
        }
        if decoding, try message.recordRoute().count != out.count {
            // A list the scan above splits otherwise than the decoder: the decoder's reading.
            return try message.recordRoute().map(\.description)
        }
        return out
    }

    /// The Call-ID `bytes` as a string: `known` when it is the same (shared, not copied).
    private static func callID(_ bytes: ArraySlice<UInt8>, known: String?) -> String {
        if let known, DialogID.same(bytes, known) { return known }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The From or To value of `message` as written; with `decoding`, decoded first (throwing
    /// what ``SIPMessage/from()`` and ``SIPMessage/to()`` throw).
    private static func party(_ header: KnownHeader, of message: SIPMessage, decoding: Bool) throws(SIPParseError) -> String {
        if decoding { _ = try header == .from ? message.from() : message.to() }
        // A message that has the tag a dialog is made from has the header.
        return message.firstValueBytes(header).map { String(decoding: $0, as: UTF8.self) } ?? ""
    }

    /// The URI of the first Contact address of `message`, `nil` when it has none. The usual
    /// shapes (`<URI>`, `name <URI>`, a bare URI) are read as written; any other is decoded
    /// (throwing what ``SIPMessage/contact()`` throws), and always with `decoding`.
    static func target(of message: SIPMessage, decoding: Bool) throws(SIPParseError) -> String? {
        let written = message.firstValueBytes(.contact).flatMap(writtenURI)
        if let written, !decoding { return written }
        guard let first = try message.contact()?.addresses.first else { return nil }
        return written ?? first.uri.description
    }

    /// The URI of the first address of a Contact line as written: between the angle brackets
    /// of a name-addr (`<URI>`, `name <URI>`, `"name" <URI>`), or an addr-spec up to its first
    /// parameter (RFC 3261 §20: without brackets a `;` starts the header's parameters). `nil`
    /// for any other shape (the wildcard, a URI with white space or without a scheme), which
    /// the caller decodes.
    static func writtenURI(_ v: ArraySlice<UInt8>) -> String? {
        var i = v.startIndex, quoted = false, bracketed = false
        scan: while i < v.endIndex {
            let x = v[i]
            if quoted {
                if x == UInt8(ascii: "\\") { i += 1 } else if x == UInt8(ascii: "\"") { quoted = false }
            } else {
                switch x {
                case UInt8(ascii: "\""): quoted = true
                case UInt8(ascii: "<"): bracketed = true; break scan
                case UInt8(ascii: ","), UInt8(ascii: ";"): break scan
                default: break
                }
            }
            i += 1
        }
        let uri: ArraySlice<UInt8>
        if bracketed {
            uri = v[(i + 1)...].prefix { $0 != UInt8(ascii: ">") }
            guard uri.endIndex < v.endIndex else { return nil }
        } else {
            guard !quoted else { return nil }
            uri = v[..<min(i, v.endIndex)]
        }
        guard uri.contains(UInt8(ascii: ":")), uri.allSatisfy({ $0 > 0x20 && $0 != 0x7F }) else { return nil }
        return String(decoding: uri, as: UTF8.self)
    }

    // MARK: Updates

    /// A 2xx confirms an early dialog; as UAC its Contact and Record-Route replace the early
    /// ones (§12.1.2, §13.2.2.4).
    public mutating func confirm(with response: SIPMessage) throws(DialogError) {
        try confirm(with: response, decoding: true)
    }

    /// ``confirm(with:)``; with `decoding` false the response's To and Contact are taken as
    /// written, not decoded again (a response the transaction layer validated).
    package mutating func confirm(with response: SIPMessage, decoding: Bool) throws(DialogError) {
        guard state != .terminated else { return }
        if isUAC {
            do {
                if let target = try Self.target(of: response, decoding: decoding) {
                    remoteTargetText = target
                    targetFromContact = true
                }
                let rr = try Self.routes(of: response, decoding: decoding)
                if !rr.isEmpty { routeTexts = rr.reversed() }
                remotePartyText = try Self.party(.to, of: response, decoding: decoding)
            } catch {
                throw .malformed(error)
            }
        }
        state = .confirmed
    }

    /// A 2xx to a target-refresh request we sent inside the dialog (re-INVITE, UPDATE) moves
    /// the remote target to its Contact (RFC 3261 §12.2.1.2).
    public mutating func refreshTarget(from response: SIPMessage) throws(DialogError) {
        do {
            if let target = try Self.target(of: response, decoding: true) {
                remoteTargetText = target
                targetFromContact = true
            }
        } catch {
            throw .malformed(error)
        }
    }

    /// Ends the dialog (BYE sent or received, or a failure for an early dialog).
    public mutating func terminate() { state = .terminated }

    /// Capture replay (``InviteSession/init(adopting:role:configuration:localBody:remoteBody:)``):
    /// our side sent a request of the dialog with CSeq `sequence`, built elsewhere (captured);
    /// the next one ``makeRequest(_:via:contact:)`` builds goes above it.
    package mutating func noteSent(sequence: UInt32) {
        if localSequence.map({ sequence > $0 }) ?? true { localSequence = sequence }
    }

    /// Checks a request received in this dialog (§12.2.2): it must belong to it and its CSeq
    /// must not go back; a target-refresh request (re-INVITE, UPDATE, and the other methods
    /// RFC 6665 names) with a Contact moves the remote target. A request refused (thrown) leaves
    /// the dialog as it was: everything is checked before anything changes.
    public mutating func receive(_ request: SIPMessage) throws(DialogError) {
        guard id.matches(incoming: request) else { throw .notThisDialog }
        let seq: UInt32
        do { seq = try request.cseq().sequence } catch { throw .malformed(error) }
        let method = request.method
        let sequenced = method != .ack && method != .cancel
        if sequenced, let last = remoteSequence, seq < last { throw .outOfOrder(received: seq, last: last) }
        var target: String?
        if method == .invite || method == .update || method == .subscribe || method == .notify || method == .refer {
            do {
                target = try Self.target(of: request, decoding: true)
            } catch {
                throw .malformed(error)
            }
        }
        if sequenced { remoteSequence = seq }
        if let target { remoteTargetText = target }
        if method == .bye { state = .terminated }
    }

    // MARK: Building requests

    /// The Request-URI and Route headers for a request in the dialog (§12.2.1.1): with a loose
    /// router first (`lr`), the remote target and the route set as is; with a strict router,
    /// that router's URI as Request-URI and the remote target appended to the route set.
    public var requestTarget: (requestURI: URI, route: [NameAddress]) {
        let routeSet = self.routeSet
        guard let first = routeSet.first else { return (remoteTarget, []) }
        if first.sipURI?.isLooseRouting ?? false { return (remoteTarget, routeSet) }
        var strippedFirst = first.uri
        if case .sip(var u) = first.uri {
            u.parameters.remove("method")
            u.headers = []
            strippedFirst = .sip(u)
        }
        return (strippedFirst, Array(routeSet.dropFirst()) + [NameAddress(uri: remoteTarget)])
    }

    /// Builds a request in the dialog: Request-URI and Route from ``requestTarget``, From/To
    /// with the dialog's tags, Call-ID, a CSeq one above the last local one (§12.2.1.1), Max-
    /// Forwards, and the given top Via. ACK and CANCEL must not use this (they reuse the CSeq of
    /// the request they belong to): see ``makeAck(for:via:)``.
    public mutating func makeRequest(_ method: SIPMethod, via: Via, contact: NameAddress? = nil) throws(DialogError) -> SIPMessage {
        precondition(method != .ack && method != .cancel, "ACK and CANCEL reuse the CSeq of their request")
        // A UAS sending its first request in the dialog starts at 1 (any value below 2^31 is
        // allowed, §8.1.1.5; a fixed one keeps simulations reproducible).
        let next = localSequence.map { $0 &+ 1 } ?? 1
        localSequence = next
        return try build(method, cseq: next, via: via, contact: contact)
    }

    /// The ACK for a 2xx to an INVITE sent in (or creating) the dialog (§13.2.2.4): same CSeq
    /// number as the INVITE, method ACK, routed like any request of the dialog.
    public func makeAck(for invite: SIPMessage, via: Via) throws(DialogError) -> SIPMessage {
        let seq: UInt32
        do { seq = try invite.cseq().sequence } catch { throw .malformed(error) }
        return try build(.ack, cseq: seq, via: via, contact: nil)
    }

    private func build(_ method: SIPMethod, cseq: UInt32, via: Via, contact: NameAddress?) throws(DialogError) -> SIPMessage {
        do {
            // No route set or a loose router first: the remote target as written, no decoding.
            var m: SIPMessage
            let route: [String]
            if routeTexts.first.map({ Self.address($0).sipURI?.isLooseRouting ?? false }) ?? true {
                m = try SIPMessage(method: method, requestURI: remoteTargetText)
                route = routeTexts
            } else {
                let target = requestTarget
                m = try SIPMessage(method: method, uri: target.requestURI)
                route = target.route.map(\.description)
            }
            try m.append(.via, via)
            try m.append(.maxForwards, "70")
            for r in route { try m.append(.route, r) }
            try m.append(.from, localPartyText)
            try m.append(.to, remotePartyText)
            try m.append(.callID, id.callID)
            try m.append(.cseq, CSeq(cseq, method))
            if let c = contact { try m.append(.contact, c) }
            return m
        } catch {
            throw .malformed(error)
        }
    }
}
