/// Why an offer or answer could not be used, with the SIP response to send.
///
/// For a refused **offer** send ``statusCode`` (488 Not Acceptable Here, 491
/// Request Pending for glare) with ``warningHeaderValue(agent:)`` as the
/// `Warning` header (RFC 3261 section 20.43). A refused **answer** cannot be
/// rejected with a response (it arrives in a 2xx or an ACK): the session
/// machine acknowledges it and then ends the session with BYE, or, for a
/// re-INVITE, keeps the previous session (``OfferAnswer/rollback()`` is not
/// needed: a failed answer leaves the state unchanged except that the offer
/// is no longer pending).
public struct OfferAnswerError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong. `media` is the 0-based index of the `m=` line.
    public enum Reason: Hashable, Sendable, CustomStringConvertible {
        /// The body is not valid SDP.
        case malformed(SDPParseError)
        /// An active stream has no `c=` line, neither its own nor a session-level one.
        case missingConnection(media: Int)
        /// No media type of the offer is one we have a stream for (for example only `m=video`).
        case mediaTypeNotAvailable(media: Int, MediaType)
        /// The transport protocol is not one we speak (for example `UDP/TLS/RTP/SAVPF` or `RTP/AVPF`).
        case unsupportedTransport(media: Int, TransportProtocol)
        /// The connection address type does not match ours (IPv6 offered to an IPv4 endpoint).
        case incompatibleAddressType(media: Int, AddressType)
        /// No codec in common.
        case noCommonCodec(media: Int)
        /// Only auxiliary formats (telephone-event, CN) in common.
        case onlyAuxiliaryCodecsInCommon(media: Int)
        /// SRTP offered (or required by us) but no `a=crypto` we accept.
        case noAcceptableCrypto(media: Int)
        /// Our policy is mandatory SRTP and the offer is plain RTP without `a=crypto`.
        case srtpRequired(media: Int)
        /// `RTP/SAVP` offered and our policy is SRTP off.
        case srtpNotSupported(media: Int)
        /// A re-offer has fewer `m=` lines than the session (RFC 3264 section 8), or
        /// an answer has a different number of `m=` lines than our offer.
        case mediaLineCount(expected: Int, found: Int)
        /// The answer's `m=` line has another media type than our offer's.
        case mediaTypeMismatch(media: Int)
        /// The answer's `m=` line has another transport protocol than our offer's.
        case transportMismatch(media: Int)
        /// The answer maps a payload type number of our offer to another codec.
        /// (Formats we did not offer are allowed in an answer, RFC 3264 section 6.1,
        /// and ignored.)
        case payloadTypeMismatch(media: Int, payloadType: UInt8)
        /// The answer's `a=crypto` has a tag or suite we did not offer, or an unusable key.
        case cryptoNotOffered(media: Int, tag: UInt32)
        /// Our offer was `RTP/SAVP` and the answer has no `a=crypto`.
        case missingCrypto(media: Int)
        /// The answer declines every stream.
        case allStreamsDeclined
        /// A new offer arrived while ours is pending (glare, RFC 3261 section 14.2).
        case offerPending
        /// An answer arrived, or was asked for, while no offer was pending.
        case noOfferPending
        /// The local capabilities cannot be offered (for example a key of the wrong length).
        case invalidCapabilities(String)

        /// A sentence for logs.
        public var description: String {
            switch self {
            case .malformed(let error): return "malformed SDP: \(error)"
            case .missingConnection(let m): return "m-line \(m): no connection address"
            case .mediaTypeNotAvailable(let m, let type): return "m-line \(m): media type \(type) not available"
            case .unsupportedTransport(let m, let proto): return "m-line \(m): transport \(proto) not supported"
            case .incompatibleAddressType(let m, let type): return "m-line \(m): address type \(type) not supported"
            case .noCommonCodec(let m): return "m-line \(m): no codec in common"
            case .onlyAuxiliaryCodecsInCommon(let m): return "m-line \(m): only telephone-event/CN in common"
            case .noAcceptableCrypto(let m): return "m-line \(m): no acceptable a=crypto"
            case .srtpRequired(let m): return "m-line \(m): SRTP required"
            case .srtpNotSupported(let m): return "m-line \(m): SRTP not supported"
            case .mediaLineCount(let expected, let found): return "expected \(expected) m-lines, found \(found)"
            case .mediaTypeMismatch(let m): return "m-line \(m): media type differs from the offer"
            case .transportMismatch(let m): return "m-line \(m): transport differs from the offer"
            case .payloadTypeMismatch(let m, let pt): return "m-line \(m): payload type \(pt) names another codec than in the offer"
            case .cryptoNotOffered(let m, let tag): return "m-line \(m): a=crypto tag \(tag) was not offered"
            case .missingCrypto(let m): return "m-line \(m): answer to RTP/SAVP has no a=crypto"
            case .allStreamsDeclined: return "every stream declined"
            case .offerPending: return "an offer is already pending"
            case .noOfferPending: return "no offer is pending"
            case .invalidCapabilities(let detail): return "invalid local capabilities: \(detail)"
            }
        }
    }

    /// What went wrong.
    public var reason: Reason

    /// Creates an error.
    public init(_ reason: Reason) { self.reason = reason }

    /// The SIP status code to answer a refused offer with: 491 for
    /// ``Reason/offerPending``, 500 for ``Reason/invalidCapabilities(_:)`` and
    /// ``Reason/noOfferPending`` (local mistakes), 488 otherwise.
    public var statusCode: Int {
        switch reason {
        case .offerPending: return 491
        case .invalidCapabilities, .noOfferPending: return 500
        default: return 488
        }
    }

    /// The RFC 3261 section 20.43 warning code: 301 incompatible network
    /// address formats, 302 incompatible transport protocol, 304 media type
    /// not available, 305 incompatible media format, 399 miscellaneous;
    /// nil for errors that are not about the description (glare, state).
    public var warningCode: Int? {
        switch reason {
        case .incompatibleAddressType: return 301
        case .unsupportedTransport, .srtpRequired, .srtpNotSupported, .transportMismatch: return 302
        case .mediaTypeNotAvailable, .allStreamsDeclined, .mediaTypeMismatch: return 304
        case .noCommonCodec, .onlyAuxiliaryCodecsInCommon, .noAcceptableCrypto, .payloadTypeMismatch,
            .cryptoNotOffered, .missingCrypto:
            return 305
        case .malformed, .missingConnection, .mediaLineCount: return 399
        case .offerPending, .noOfferPending, .invalidCapabilities: return nil
        }
    }

    /// The warning text: the RFC 3261 phrase for the code, then the detail.
    public var warningText: String {
        let phrase: String
        switch warningCode {
        case 301: phrase = "Incompatible network address formats"
        case 302: phrase = "Incompatible transport protocol"
        case 304: phrase = "Media type not available"
        case 305: phrase = "Incompatible media format"
        default: phrase = "Miscellaneous warning"
        }
        return "\(phrase): \(reason)"
    }

    /// The `Warning` header value, for example
    /// `305 switchboard "Incompatible media format: m-line 0: no codec in common"`;
    /// nil when ``warningCode`` is nil. Quotes and backslashes in the text are escaped.
    public func warningHeaderValue(agent: String = "switchboard") -> String? {
        guard let code = warningCode else { return nil }
        var quoted = ""
        for character in warningText {
            switch character {
            case "\"", "\\": quoted += "\\\(character)"
            case "\r", "\n": quoted += " "
            default: quoted.append(character)
            }
        }
        return "\(code) \(agent) \"\(quoted)\""
    }

    /// For example `488 (305): m-line 0: no codec in common`.
    public var description: String {
        "\(statusCode)" + (warningCode.map { " (\($0))" } ?? "") + ": \(reason)"
    }
}
