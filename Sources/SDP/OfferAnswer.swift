/// The RFC 3264 offer/answer engine for one session: a value type, pure and
/// free of I/O, that makes offers and answers from ``MediaCapabilities``,
/// checks the peer's, and reports what was agreed as a ``NegotiatedSession``.
///
/// One value per dialog: for a forked INVITE, keep the value as it is after
/// ``makeOffer()`` and give each early dialog its own copy before it takes an
/// answer. The same calls serve offers in INVITE, 18x/PRACK, 200 OK, ACK,
/// UPDATE and re-INVITE:
///
/// ```swift
/// // UAC, offer in INVITE, answer in 200:
/// var oa = OfferAnswer(capabilities: capabilities, sessionID: 4242)
/// let offer = try oa.makeOffer()                         // INVITE body: offer.serialized()
/// let session = try oa.receiveAnswer(bytes: okBody)      // from the 200 OK
///
/// // UAS, offer in INVITE:
/// let reply = try oa.receiveOffer(bytes: inviteBody)     // reply.sdp.serialized() → 200 OK body
/// // on error: respond error.statusCode with Warning: error.warningHeaderValue()
///
/// // Hold (re-INVITE), then resume:
/// oa.setHold(true); let hold = try oa.makeOffer()
/// oa.setHold(false); let resume = try oa.makeOffer()
///
/// // Delayed offer (INVITE without SDP): offer in the 200, answer in the ACK:
/// let offerIn200 = try oa.makeOffer(); let media = try oa.receiveAnswer(bytes: ackBody)
/// ```
///
/// Policies (see docs/ARCHITECTURE.md, "SDP"): answers keep the offerer's
/// payload type numbers and, by default, its codec order; the codec to send
/// is the first in common in the peer's order; an answer that changes
/// nothing keeps the `o=` version, one that changes something takes the
/// highest version sent so far plus one.
public struct OfferAnswer: Sendable {
    /// Where the exchange stands (RFC 3264 section 4). An offer received is
    /// answered in the same call, so there is no "remote offer pending" state.
    public enum State: Hashable, Sendable {
        /// No offer made or received yet.
        case initial
        /// We sent an offer and wait for the answer.
        case localOfferPending
        /// The last exchange completed; either side may offer again.
        case stable
    }

    /// The order of the formats in our answers.
    public enum AnswerOrder: Hashable, Sendable {
        /// The offerer's order (the default): both sides then send the codec
        /// the offerer prefers, so the call is symmetric.
        case offerer
        /// Our preference order (the order of ``StreamCapabilities/codecs``).
        case local
    }

    /// Our capabilities. Change them between exchanges (ports, keys, the
    /// direction for hold); the next offer or answer uses them.
    public var capabilities: MediaCapabilities
    /// The order of formats in our answers; ``AnswerOrder/offerer`` by default.
    public var answerOrder: AnswerOrder = .offerer
    /// The `o=` session id, the same in every description of the session.
    public private(set) var sessionID: UInt64
    /// Where the exchange stands.
    public private(set) var state: State = .initial
    /// The last description we sent (offer or answer).
    public private(set) var localDescription: SessionDescription?
    /// The last description we received and accepted (offer or answer).
    public private(set) var remoteDescription: SessionDescription?
    /// The result of the last completed exchange.
    public private(set) var negotiated: NegotiatedSession?

    private var lines: [Line] = []
    private var initialVersion: UInt64
    private var highestVersionSent: UInt64?
    private var snapshot: Snapshot?

    /// Creates the engine. `sessionVersion` is the `o=` version of the first
    /// description (by default equal to `sessionID`, a common convention).
    public init(capabilities: MediaCapabilities, sessionID: UInt64, sessionVersion: UInt64? = nil) {
        self.capabilities = capabilities
        self.sessionID = sessionID
        self.initialVersion = sessionVersion ?? sessionID
    }

    /// Sets the direction intent of every stream: `sendonly` to put the peer
    /// on hold, `sendrecv` to resume. The next offer carries it.
    public mutating func setHold(_ held: Bool) {
        for index in capabilities.streams.indices {
            capabilities.streams[index].direction = held ? .sendonly : .sendrecv
        }
    }

    // MARK: Offers

    /// Makes an offer: the initial one (one `m=` line per stream in
    /// ``MediaCapabilities/streams``) or a re-offer (the session's `m=` lines,
    /// in order, with the payload type numbers used so far and the current
    /// capabilities, for example a hold direction).
    ///
    /// - Throws: ``OfferAnswerError/Reason/offerPending`` when our previous
    ///   offer has no answer yet; ``OfferAnswerError/Reason/invalidCapabilities(_:)``.
    public mutating func makeOffer() throws(OfferAnswerError) -> SessionDescription {
        guard state != .localOfferPending else { throw OfferAnswerError(.offerPending) }
        var newLines = lines
        if state == .initial {
            newLines = capabilities.streams.enumerated().map { index, stream in
                Line(mediaType: stream.mediaType, stream: index, proto: .rtpAVP, formats: [])
            }
        }
        var description = newDescription(timing: [Timing()])
        for index in newLines.indices {
            guard let streamIndex = newLines[index].stream, streamIndex < capabilities.streams.count else {
                description.addMedia(newLines[index].disabled)
                continue
            }
            description.addMedia(try offeredMedia(stream: capabilities.streams[streamIndex], line: &newLines[index]))
        }
        snapshot = Snapshot(self)
        stampVersion(&description)
        lines = newLines
        localDescription = description
        state = .localOfferPending
        return description
    }

    /// Takes the answer to our pending offer, checks it and returns what was agreed.
    ///
    /// An answer equal to the last one accepted is taken again without error
    /// (the same answer in a 183 and then in the 200).
    ///
    /// - Throws: ``OfferAnswerError``; the state then returns to what it was
    ///   before the offer (the offer is no longer pending).
    public mutating func receiveAnswer(_ answer: SessionDescription) throws(OfferAnswerError) -> NegotiatedSession {
        guard state == .localOfferPending, let offer = localDescription else {
            if state == .stable, answer == remoteDescription, let negotiated { return negotiated }
            throw OfferAnswerError(.noOfferPending)
        }
        do {
            let result = try negotiateAnswer(answer, to: offer)
            remoteDescription = answer
            negotiated = result
            state = .stable
            snapshot = nil
            return result
        } catch {
            rollback()
            throw error
        }
    }

    /// Parses and takes the answer to our pending offer; see ``receiveAnswer(_:)``.
    public mutating func receiveAnswer(bytes: some Collection<UInt8>) throws(OfferAnswerError) -> NegotiatedSession {
        let answer: SessionDescription
        do { answer = try SessionDescription.parse(bytes) } catch {
            if state == .localOfferPending { rollback() }
            throw OfferAnswerError(.malformed(error))
        }
        return try receiveAnswer(answer)
    }

    // MARK: Answers

    /// What ``receiveOffer(_:)`` returns.
    public struct Answer: Hashable, Sendable {
        /// The answer to send (its body: `sdp.serialized()`).
        public var sdp: SessionDescription
        /// What was agreed.
        public var negotiated: NegotiatedSession
    }

    /// Answers an offer (initial, re-offer, or an offer in a 200 OK after an
    /// INVITE without SDP) per RFC 3264 section 6: the same `m=` lines in the
    /// same order, unsupported ones declined with port 0, the offerer's
    /// payload type numbers, an `a=crypto` of the offer's, the mirrored direction.
    ///
    /// The answer is committed at once; call ``rollback()`` if it is not sent
    /// (for example when the re-INVITE is refused for another reason).
    ///
    /// - Throws: ``OfferAnswerError`` with the response to send: 488 and a
    ///   warning when nothing can be accepted, 491 when our own offer is pending.
    public mutating func receiveOffer(_ offer: SessionDescription) throws(OfferAnswerError) -> Answer {
        guard state != .localOfferPending else { throw OfferAnswerError(.offerPending) }
        guard offer.media.count >= lines.count else {
            throw OfferAnswerError(.mediaLineCount(expected: lines.count, found: offer.media.count))
        }
        var newLines = lines
        var answerMedia: [MediaDescription] = []
        var accepted: [NegotiatedMedia] = []
        var declined: [Int] = []
        var reasons: [(MediaType, OfferAnswerError.Reason)] = []
        for (index, offered) in offer.media.enumerated() {
            if index == newLines.count {
                newLines.append(Line(mediaType: offered.media, stream: nil, proto: offered.proto, formats: offered.formats))
            } else if newLines[index].mediaType != offered.media {
                newLines[index] = Line(mediaType: offered.media, stream: nil, proto: offered.proto, formats: offered.formats)
            }
            guard !offered.isRejected else {
                newLines[index].stream = nil
                newLines[index].formats = offered.formats
                newLines[index].proto = offered.proto
                answerMedia.append(newLines[index].disabled)
                declined.append(index)
                continue
            }
            if newLines[index].stream == nil {
                let bound = Set(newLines.compactMap(\.stream))
                newLines[index].stream = capabilities.streams.indices.first {
                    capabilities.streams[$0].mediaType == offered.media && !bound.contains($0)
                }
            }
            let outcome: StreamOutcome
            if let streamIndex = newLines[index].stream {
                outcome = try answerStream(offered, index: index, in: offer, streamIndex: streamIndex, line: &newLines[index])
            } else {
                outcome = .declined(.mediaTypeNotAvailable(media: index, offered.media))
            }
            switch outcome {
            case .accepted(let media, let negotiated):
                answerMedia.append(media)
                accepted.append(negotiated)
            case .declined(let reason):
                newLines[index].stream = nil
                newLines[index].formats = offered.formats
                newLines[index].proto = offered.proto
                answerMedia.append(newLines[index].disabled)
                declined.append(index)
                reasons.append((offered.media, reason))
            }
        }
        if accepted.isEmpty, let first = reasons.first(where: { $0.0 == .audio }) ?? reasons.first {
            throw OfferAnswerError(first.1)
        }
        var answer = newDescription(timing: offer.timing.isEmpty ? [Timing()] : offer.timing)
        answer.media = answerMedia
        snapshot = Snapshot(self)
        stampVersion(&answer)
        lines = newLines
        localDescription = answer
        remoteDescription = offer
        let result = NegotiatedSession(media: accepted, declined: declined)
        negotiated = result
        state = .stable
        return Answer(sdp: answer, negotiated: result)
    }

    /// Parses and answers an offer; see ``receiveOffer(_:)``. A body that is
    /// not valid SDP gives ``OfferAnswerError/Reason/malformed(_:)`` (488, warning 399
    /// with the line and offset).
    public mutating func receiveOffer(bytes: some Collection<UInt8>) throws(OfferAnswerError) -> Answer {
        let offer: SessionDescription
        do { offer = try SessionDescription.parse(bytes) } catch { throw OfferAnswerError(.malformed(error)) }
        return try receiveOffer(offer)
    }

    /// Undoes the last offer made, or the last answer given, returning to the
    /// state before it: after a 488/491 to our re-INVITE, or when an answer
    /// computed by ``receiveOffer(_:)`` is not sent. The `o=` version keeps
    /// counting from the highest one sent. Does nothing when there is nothing to undo.
    public mutating func rollback() {
        guard let saved = snapshot else { return }
        lines = saved.lines
        localDescription = saved.localDescription
        remoteDescription = saved.remoteDescription
        negotiated = saved.negotiated
        state = saved.state
        snapshot = nil
    }

    // MARK: Building

    private func newDescription(timing: [Timing]) -> SessionDescription {
        SessionDescription(
            origin: Origin(
                username: capabilities.username, sessionID: sessionID, sessionVersion: initialVersion,
                addressType: capabilities.addressType, address: capabilities.address),
            connection: Connection(addressType: capabilities.addressType, address: capabilities.address),
            timing: timing)
    }

    /// RFC 3264 section 8: the same version when nothing changed since the
    /// last description sent, else one more than the highest version sent.
    private mutating func stampVersion(_ description: inout SessionDescription) {
        if let last = localDescription {
            description.origin.sessionVersion = last.origin.sessionVersion
            if description == last { return }
            description.origin.sessionVersion = (highestVersionSent ?? last.origin.sessionVersion) &+ 1
        } else if let highest = highestVersionSent {
            description.origin.sessionVersion = highest &+ 1
        }
        highestVersionSent = description.origin.sessionVersion
    }

    private func offeredMedia(stream: StreamCapabilities, line: inout Line) throws(OfferAnswerError) -> MediaDescription {
        let proto: TransportProtocol = stream.srtp.policy == .mandatory ? .rtpSAVP : .rtpAVP
        var media = MediaDescription(media: stream.mediaType, port: stream.port, proto: proto, formats: [])
        if let address = stream.address, address != capabilities.address {
            media.connections = [Connection(addressType: address.contains(":") ? .ip6 : .ip4, address: address)]
        }
        for codec in stream.codecs {
            guard let payloadType = line.payloadType(for: codec) else { continue }
            media.addCodec(codec.rtpmap(payloadType: payloadType), parameters: codec.parameters)
        }
        guard !media.formats.isEmpty else {
            throw OfferAnswerError(.invalidCapabilities("no codec for the \(stream.mediaType) stream"))
        }
        if let ptime = stream.ptime { media.setPtime(ptime) }
        media.setDirection(stream.direction)
        if stream.rtcpMux { media.setRTCPMux(true) }
        if stream.srtp.policy != .off {
            guard !stream.srtp.keys.isEmpty else {
                throw OfferAnswerError(.invalidCapabilities("SRTP \(stream.srtp.policy) without keys"))
            }
            for (offset, key) in stream.srtp.keys.enumerated() {
                guard Self.isUsable(key.keyParameters, for: key.suite) else {
                    throw OfferAnswerError(.invalidCapabilities("key for \(key.suite) has the wrong length or method"))
                }
                media.addAttribute(CryptoAttribute(tag: UInt32(offset + 1), suite: key.suite, keyParameters: key.keyParameters))
            }
        }
        line.proto = proto
        line.formats = media.formats
        return media
    }

    /// True when every key is `inline`, valid base64, and of the suite's length (when known).
    static func isUsable(_ keys: [CryptoAttribute.KeyParameter], for suite: CryptoSuite) -> Bool {
        guard !keys.isEmpty else { return false }
        return keys.allSatisfy { key in
            guard let bytes = key.keySaltBytes, !bytes.isEmpty else { return false }
            return suite.keySaltLength.map { $0 == bytes.count } ?? true
        }
    }

    // MARK: Answering one stream

    private func answerStream(
        _ offered: MediaDescription, index: Int, in offer: SessionDescription, streamIndex: Int, line: inout Line
    ) throws(OfferAnswerError) -> StreamOutcome {
        let stream = capabilities.streams[streamIndex]
        guard let connection = offer.connection(for: offered) else { throw OfferAnswerError(.missingConnection(media: index)) }
        guard offered.proto == .rtpAVP || offered.proto == .rtpSAVP else {
            return .declined(.unsupportedTransport(media: index, offered.proto))
        }
        let localAddressType: AddressType = stream.address.map { $0.contains(":") ? .ip6 : .ip4 } ?? capabilities.addressType
        guard connection.addressType == localAddressType else {
            return .declined(.incompatibleAddressType(media: index, connection.addressType))
        }

        // SRTP (RFC 4568 section 7.1.2: the first offered line we accept).
        let secure = offered.proto == .rtpSAVP
        let crypto = Self.acceptableCrypto(in: offered, keys: stream.srtp.keys)
        switch stream.srtp.policy {
        case .off:
            if secure { return .declined(.srtpNotSupported(media: index)) }
        case .optional:
            if secure, crypto == nil { return .declined(.noAcceptableCrypto(media: index)) }
        case .mandatory:
            if crypto == nil {
                return .declined(secure || !offered.cryptos.isEmpty ? .noAcceptableCrypto(media: index) : .srtpRequired(media: index))
            }
        }
        let useCrypto = stream.srtp.policy == .off ? nil : crypto

        // Codecs, in the offer's order, under the offer's numbers.
        var chosen: [Choice] = []
        for payloadType in offered.payloadTypes {
            guard let (declared, remote) = Self.codec(in: offered, payloadType: payloadType),
                let localIndex = stream.codecs.firstIndex(where: { Self.codec($0, matches: remote) }),
                !chosen.contains(where: { $0.localIndex == localIndex })
            else { continue }
            let codec = stream.codecs[localIndex]
            let remoteParameters = offered.fmtp(forPayloadType: payloadType)?.parameters
            guard case .compatible(let answerParameters) = codec.parameterRule.reconcile(remoteParameters, codec.parameters)
            else { continue }
            chosen.append(Choice(
                payloadType: payloadType, localIndex: localIndex, rtpmap: remote, declared: declared,
                remoteParameters: remoteParameters, answerParameters: answerParameters,
                isAuxiliary: codec.isAuxiliary))
        }
        guard chosen.contains(where: { !$0.isAuxiliary }) else {
            return .declined(chosen.isEmpty ? .noCommonCodec(media: index) : .onlyAuxiliaryCodecsInCommon(media: index))
        }
        let sendOrder = chosen
        if answerOrder == .local { chosen.sort { $0.localIndex < $1.localIndex } }

        // Direction: the mirror of the offer's, within our intent. c=0.0.0.0
        // means the offerer does not want to receive (RFC 3264 section 8.4).
        var remoteDirection = offer.effectiveDirection(for: offered)
        if connection.isUnspecified { remoteDirection = remoteDirection.intersection(.sendonly) }
        let direction = remoteDirection.reversed.intersection(stream.direction)
        let rtcpMux = stream.rtcpMux && offered.isRTCPMuxed

        var media = MediaDescription(media: offered.media, port: stream.port, proto: offered.proto, formats: [])
        if let address = stream.address, address != capabilities.address {
            media.connections = [Connection(addressType: localAddressType, address: address)]
        }
        for choice in chosen { media.addCodec(choice.declared, parameters: choice.answerParameters) }
        if let ptime = stream.ptime { media.setPtime(ptime) }
        media.setDirection(direction)
        if rtcpMux { media.setRTCPMux(true) }
        var srtp: NegotiatedSRTP?
        if let (offeredCrypto, key) = useCrypto {
            media.addAttribute(CryptoAttribute(tag: offeredCrypto.tag, suite: offeredCrypto.suite, keyParameters: key.keyParameters))
            srtp = NegotiatedSRTP(
                suite: offeredCrypto.suite, tag: offeredCrypto.tag, localKeys: key.keyParameters,
                remoteKeys: offeredCrypto.keyParameters)
        }

        guard let send = sendOrder.first(where: { !$0.isAuxiliary }) else { return .declined(.noCommonCodec(media: index)) }
        let sendCodec = Self.negotiated(send.rtpmap, parameters: send.remoteParameters)
        let events = sendOrder.filter { $0.rtpmap.encodingName.lowercased() == "telephone-event" }
        let event = events.first { $0.rtpmap.clockRate == send.rtpmap.clockRate } ?? events.first
        let rtcp = Self.remoteRTCP(offered, connection: connection, mux: rtcpMux)
        let negotiated = NegotiatedMedia(
            index: index, localStream: streamIndex, mediaType: offered.media, proto: offered.proto,
            remoteAddress: connection.address, remoteRTPPort: offered.port,
            remoteRTCPAddress: rtcp.address, remoteRTCPPort: rtcp.port, rtcpMux: rtcpMux,
            sendCodec: sendCodec,
            receiveCodecs: chosen.map { Self.negotiated($0.rtpmap, parameters: $0.answerParameters) },
            telephoneEvent: event.map { Self.negotiated($0.rtpmap, parameters: $0.remoteParameters) },
            ptime: offered.ptime ?? stream.ptime.map(Double.init),
            direction: direction,
            isHeldByRemote: !remoteDirection.receives || connection.isUnspecified,
            srtp: srtp)

        line.proto = offered.proto
        line.formats = media.formats
        line.usedPayloadTypes.formUnion(offered.payloadTypes)
        for choice in chosen { line.assign(choice.payloadType, to: CodecKey(stream.codecs[choice.localIndex])) }
        return .accepted(media, negotiated)
    }

    private enum StreamOutcome {
        case accepted(MediaDescription, NegotiatedMedia)
        case declined(OfferAnswerError.Reason)
    }

    private struct Choice {
        var payloadType: UInt8
        var localIndex: Int
        /// The codec, static payload types read by their RFC 3551 assignment.
        var rtpmap: RTPMap
        /// The offer's a=rtpmap as written (echoed in the answer).
        var declared: RTPMap
        var remoteParameters: String?
        var answerParameters: String?
        var isAuxiliary: Bool
    }

    /// The codec under `payloadType` in `media`: `declared` is its `a=rtpmap`
    /// (or the RFC 3551 assignment when there is none); `effective` is what
    /// to use: for a static number whose `a=rtpmap` names the assigned codec,
    /// the assignment (so `9 G722/16000`, a common mistake, is G.722 at its
    /// RTP clock rate of 8000).
    static func codec(in media: MediaDescription, payloadType: UInt8) -> (declared: RTPMap, effective: RTPMap)? {
        let assigned = RTPMap.staticPayloadType(payloadType)
        guard let declared = media.rtpmap(forPayloadType: payloadType) ?? assigned else { return nil }
        if let assigned, assigned.encodingName.lowercased() == declared.encodingName.lowercased() {
            return (declared, assigned)
        }
        return (declared, declared)
    }

    /// Codec matching: name, clock rate and channels; for telephone-event and
    /// CN, name and clock rate only.
    static func codec(_ codec: Codec, matches rtpmap: RTPMap) -> Bool {
        if codec.isAuxiliary {
            return codec.name.lowercased() == rtpmap.encodingName.lowercased() && codec.clockRate == rtpmap.clockRate
        }
        return codec.matches(rtpmap)
    }

    static func negotiated(_ rtpmap: RTPMap, parameters: String?) -> NegotiatedCodec {
        NegotiatedCodec(
            payloadType: rtpmap.payloadType, name: rtpmap.encodingName, clockRate: rtpmap.clockRate,
            channels: rtpmap.channels ?? 1, parameters: parameters)
    }

    static func remoteRTCP(_ media: MediaDescription, connection: Connection, mux: Bool) -> (address: String, port: UInt16) {
        if mux { return (connection.address, media.port) }
        if let rtcp = media.rtcp { return (rtcp.connection?.address ?? connection.address, rtcp.port) }
        return (connection.address, media.port == .max ? media.port : media.port + 1)
    }

    /// The first offered `a=crypto` whose suite we accept, with an inline key
    /// of the right length and no session parameter we cannot honour (only
    /// `KDR=0` and `WSH` are accepted), paired with our key for that suite.
    static func acceptableCrypto(in media: MediaDescription, keys: [SRTPKey]) -> (CryptoAttribute, SRTPKey)? {
        for crypto in media.cryptos {
            guard let key = keys.first(where: { $0.suite == crypto.suite }),
                isUsable(crypto.keyParameters, for: crypto.suite),
                crypto.sessionParameters.allSatisfy({
                    switch $0 {
                    case .keyDerivationRate(0), .windowSizeHint: return true
                    default: return false
                    }
                })
            else { continue }
            return (crypto, key)
        }
        return nil
    }

    // MARK: Taking an answer

    private mutating func negotiateAnswer(
        _ answer: SessionDescription, to offer: SessionDescription
    ) throws(OfferAnswerError) -> NegotiatedSession {
        guard answer.media.count == offer.media.count else {
            throw OfferAnswerError(.mediaLineCount(expected: offer.media.count, found: answer.media.count))
        }
        var accepted: [NegotiatedMedia] = []
        var declined: [Int] = []
        var offeredActive = false
        for (index, answered) in answer.media.enumerated() {
            let offered = offer.media[index]
            guard answered.media == offered.media else { throw OfferAnswerError(.mediaTypeMismatch(media: index)) }
            if !offered.isRejected { offeredActive = true }
            guard !offered.isRejected, !answered.isRejected, let streamIndex = lines[index].stream,
                streamIndex < capabilities.streams.count
            else {
                declined.append(index)
                continue
            }
            accepted.append(try takeAnswer(answered, in: answer, to: offered, index: index, streamIndex: streamIndex))
        }
        if accepted.isEmpty, offeredActive { throw OfferAnswerError(.allStreamsDeclined) }
        for index in lines.indices where index < answer.media.count {
            lines[index].usedPayloadTypes.formUnion(answer.media[index].payloadTypes)
            if answer.media[index].isRejected {
                // Declined by the peer: later offers keep the line at port 0.
                lines[index].stream = nil
            }
        }
        return NegotiatedSession(media: accepted, declined: declined)
    }

    private func takeAnswer(
        _ answered: MediaDescription, in answer: SessionDescription, to offered: MediaDescription, index: Int,
        streamIndex: Int
    ) throws(OfferAnswerError) -> NegotiatedMedia {
        let stream = capabilities.streams[streamIndex]
        let upgradedToSAVP = offered.proto == .rtpAVP && answered.proto == .rtpSAVP && !offered.cryptos.isEmpty
        guard answered.proto == offered.proto || upgradedToSAVP else { throw OfferAnswerError(.transportMismatch(media: index)) }
        guard let connection = answer.connection(for: answered) else { throw OfferAnswerError(.missingConnection(media: index)) }

        var send: [(rtpmap: RTPMap, parameters: String?, isAuxiliary: Bool)] = []
        var receive: [NegotiatedCodec] = []
        var anyAuxiliary = false
        for payloadType in answered.payloadTypes {
            let offeredHere = offered.payloadTypes.contains(payloadType)
            // A number we offered, written without a=rtpmap, is taken as ours.
            guard let remote = Self.codec(in: answered, payloadType: payloadType)?.effective
                ?? (offeredHere ? Self.codec(in: offered, payloadType: payloadType)?.effective : nil)
            else { continue }  // an undefined dynamic number: nothing can be sent with it
            let ours: RTPMap
            if offeredHere, let same = Self.codec(in: offered, payloadType: payloadType)?.effective {
                guard Self.sameCodec(same, remote) else {
                    throw OfferAnswerError(.payloadTypeMismatch(media: index, payloadType: payloadType))
                }
                ours = same
            } else if let other = offered.payloadTypes.lazy
                .compactMap({ Self.codec(in: offered, payloadType: $0)?.effective })
                .first(where: { Self.sameCodec($0, remote) })
            {
                ours = other  // another number for a codec we offered: allowed (SHOULD, RFC 3264 section 6.1)
            } else {
                continue  // a format we did not offer: an answer MAY list it (RFC 3264 section 6.1); unused
            }
            guard let local = stream.codecs.first(where: { Self.codec($0, matches: ours) }) else { continue }
            let remoteParameters = answered.fmtp(forPayloadType: payloadType)?.parameters
            if local.isAuxiliary { anyAuxiliary = true }
            guard case .compatible = local.parameterRule.reconcile(remoteParameters, local.parameters) else { continue }
            send.append((remote, remoteParameters, local.isAuxiliary))
            if !receive.contains(where: { $0.payloadType == ours.payloadType }) {
                receive.append(Self.negotiated(ours, parameters: offered.fmtp(forPayloadType: ours.payloadType)?.parameters))
            }
        }
        guard let sendChoice = send.first(where: { !$0.isAuxiliary }) else {
            throw OfferAnswerError(anyAuxiliary ? .onlyAuxiliaryCodecsInCommon(media: index) : .noCommonCodec(media: index))
        }

        var srtp: NegotiatedSRTP?
        if let crypto = answered.cryptos.first {
            guard let mine = offered.cryptos.first(where: { $0.tag == crypto.tag }), mine.suite == crypto.suite,
                Self.isUsable(crypto.keyParameters, for: crypto.suite)
            else { throw OfferAnswerError(.cryptoNotOffered(media: index, tag: crypto.tag)) }
            srtp = NegotiatedSRTP(suite: crypto.suite, tag: crypto.tag, localKeys: mine.keyParameters, remoteKeys: crypto.keyParameters)
        } else if offered.proto == .rtpSAVP || answered.proto == .rtpSAVP || stream.srtp.policy == .mandatory {
            throw OfferAnswerError(.missingCrypto(media: index))
        }

        var remoteDirection = answer.effectiveDirection(for: answered)
        if connection.isUnspecified { remoteDirection = remoteDirection.intersection(.sendonly) }
        let offeredDirection = offered.direction ?? .sendrecv
        let direction = offeredDirection.intersection(remoteDirection.reversed)
        let rtcpMux = offered.isRTCPMuxed && answered.isRTCPMuxed
        let rtcp = Self.remoteRTCP(answered, connection: connection, mux: rtcpMux)
        let events = send.filter { $0.rtpmap.encodingName.lowercased() == "telephone-event" }
        let event = events.first { $0.rtpmap.clockRate == sendChoice.rtpmap.clockRate } ?? events.first
        return NegotiatedMedia(
            index: index, localStream: streamIndex, mediaType: answered.media, proto: answered.proto,
            remoteAddress: connection.address, remoteRTPPort: answered.port,
            remoteRTCPAddress: rtcp.address, remoteRTCPPort: rtcp.port, rtcpMux: rtcpMux,
            sendCodec: Self.negotiated(sendChoice.rtpmap, parameters: sendChoice.parameters),
            receiveCodecs: receive,
            telephoneEvent: event.map { Self.negotiated($0.rtpmap, parameters: $0.parameters) },
            ptime: answered.ptime ?? stream.ptime.map(Double.init),
            direction: direction,
            isHeldByRemote: !remoteDirection.receives || connection.isUnspecified,
            srtp: srtp)
    }

    /// Same codec ignoring payload type numbers; telephone-event and CN by name and rate.
    static func sameCodec(_ a: RTPMap, _ b: RTPMap) -> Bool {
        let name = a.encodingName.lowercased()
        if name == "telephone-event" || name == "cn" {
            return name == b.encodingName.lowercased() && a.clockRate == b.clockRate
        }
        return a.matches(b)
    }
}

// MARK: Reissuing a first answer

extension OfferAnswer {
    /// This engine as a fresh one made with `id` (and the default version, equal to the id)
    /// would be after answering the same offer: the same exchange with `id` in the answer's
    /// `o=` line. A phone that gets the same offer on many calls answers it once and reissues
    /// the result for each new call (parse, negotiation and the answer's making skipped).
    ///
    /// Only for an engine whose one and only exchange was that first answer, made with the
    /// default version; nil for any other (its history would depend on more than the offer).
    package func reissued(sessionID id: UInt64) -> OfferAnswer? {
        // Read in place (no copy of the descriptions for the checks).
        guard state == .stable, initialVersion == sessionID, highestVersionSent == sessionID,
              localDescription?.origin.sessionID == sessionID, localDescription?.origin.sessionVersion == sessionID,
              snapshot?.state == .initial, snapshot?.lines.isEmpty == true, snapshot?.localDescription == nil,
              snapshot?.remoteDescription == nil, snapshot?.negotiated == nil
        else { return nil }
        var copy = self
        copy.sessionID = id
        copy.initialVersion = id
        copy.highestVersionSent = id
        copy.localDescription!.origin.sessionID = id
        copy.localDescription!.origin.sessionVersion = id
        return copy
    }
}

// MARK: Per m-line state

extension OfferAnswer {
    /// A codec's identity for stable payload type numbering.
    struct CodecKey: Hashable, Sendable {
        var name: String
        var clockRate: UInt32
        var channels: UInt8

        init(_ codec: Codec) {
            name = codec.name.lowercased()
            clockRate = codec.clockRate
            channels = codec.isAuxiliary ? 1 : codec.channels ?? 1
        }
    }

    /// What the session remembers about one `m=` line.
    struct Line: Hashable, Sendable {
        var mediaType: MediaType
        /// The local stream bound to this line; nil when the line is disabled.
        var stream: Int?
        var proto: TransportProtocol
        /// The formats last written or seen, for a disabled copy.
        var formats: [String]
        /// Our payload type number for each codec, kept across the session.
        var payloadTypes: [CodecKey: UInt8] = [:]
        /// Every number used on this line by either side.
        var usedPayloadTypes: Set<UInt8> = []

        /// The line with port 0 (RFC 3264 sections 6 and 8.2).
        var disabled: MediaDescription {
            MediaDescription(media: mediaType, port: 0, proto: proto, formats: formats.isEmpty ? ["0"] : formats)
        }

        /// The number to offer `codec` under: the one used before; else its
        /// static number, or its preferred dynamic number when free; else the
        /// lowest free dynamic number. Nil when 96–127 are all taken.
        mutating func payloadType(for codec: Codec) -> UInt8? {
            let key = CodecKey(codec)
            if let known = payloadTypes[key] { return known }
            let taken = usedPayloadTypes.union(payloadTypes.values)
            var chosen: UInt8?
            if let assigned = RTPMap.staticPayloadType(codec.payloadType), codec.matches(assigned) {
                chosen = codec.payloadType
            } else if codec.payloadType >= 96, codec.payloadType <= 127, !taken.contains(codec.payloadType) {
                chosen = codec.payloadType
            } else {
                chosen = (96...127).first { !taken.contains($0) }
            }
            guard let chosen else { return nil }
            assign(chosen, to: key)
            return chosen
        }

        /// Records `payloadType` as our number for `key`, and for no other codec.
        mutating func assign(_ payloadType: UInt8, to key: CodecKey) {
            for (other, number) in payloadTypes where number == payloadType && other != key {
                payloadTypes[other] = nil
            }
            payloadTypes[key] = payloadType
            usedPayloadTypes.insert(payloadType)
        }
    }

    struct Snapshot: Sendable {
        var lines: [Line]
        var localDescription: SessionDescription?
        var remoteDescription: SessionDescription?
        var negotiated: NegotiatedSession?
        var state: State

        init(_ engine: OfferAnswer) {
            lines = engine.lines
            localDescription = engine.localDescription
            remoteDescription = engine.remoteDescription
            negotiated = engine.negotiated
            state = engine.state
        }
    }
}
