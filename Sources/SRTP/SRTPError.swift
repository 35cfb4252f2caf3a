import SDP

/// Why an SRTP operation failed. Packets that fail to unprotect are never delivered; the
/// session counts them (``SRTPStatistics``).
public enum SRTPError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The authentication tag (or GCM tag) did not verify: forged, corrupted, or the wrong key.
    case authenticationFailed
    /// The packet index was already seen or is older than the replay window.
    case replayed
    /// The packet is too short or its header is not RTP/RTCP version 2 (what was wrong).
    case malformedPacket(String)
    /// The MKI in the packet names no key of this session.
    case unknownMKI
    /// The crypto suite is not one libsrtp offers here.
    case unsupportedSuite(CryptoSuite)
    /// Key material unusable: wrong length, not base64, not `inline`, bad MKI (what was wrong).
    case invalidKey(String)
    /// An `a=crypto` session parameter this implementation does not support (RFC 4568 §6.3:
    /// the offer's line is then not acceptable).
    case unsupportedSessionParameter(String)
    /// None of the offered `a=crypto` lines is acceptable.
    case noAcceptableCrypto
    /// The master key has protected as many packets as its lifetime allows (RFC 4568 §6.1);
    /// re-key before sending more.
    case keyLifetimeExhausted
    /// protect on an inbound session or unprotect on an outbound one.
    case wrongDirection
    /// The buffer cannot hold the protected packet (its length plus the trailer).
    case bufferTooSmall(needed: Int, available: Int)
    /// Another libsrtp failure: the operation and its `srtp_err_status_t`.
    case library(operation: String, status: Int32)

    /// A one-line explanation.
    public var description: String {
        switch self {
        case .authenticationFailed: return "SRTP authentication failed"
        case .replayed: return "SRTP replay check failed"
        case .malformedPacket(let why): return "malformed packet: \(why)"
        case .unknownMKI: return "unknown MKI"
        case .unsupportedSuite(let suite): return "unsupported crypto suite \(suite)"
        case .invalidKey(let why): return "invalid SRTP key: \(why)"
        case .unsupportedSessionParameter(let p): return "unsupported SRTP session parameter \(p)"
        case .noAcceptableCrypto: return "no acceptable a=crypto offered"
        case .keyLifetimeExhausted: return "SRTP master key lifetime exhausted"
        case .wrongDirection: return "operation does not match the session's direction"
        case .bufferTooSmall(let needed, let available): return "buffer too small: \(needed) needed, \(available) available"
        case .library(let operation, let status): return "\(operation) failed with srtp_err_status \(status)"
        }
    }
}
