/// The direction attributes of RFC 8866 section 6.7 / RFC 3264 section 5.1:
/// `a=sendrecv`, `a=sendonly`, `a=recvonly` and `a=inactive`.
public enum MediaDirection: String, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// Send and receive; the default when no direction attribute is present.
    case sendrecv
    /// Send only (for example when putting the peer on hold).
    case sendonly
    /// Receive only.
    case recvonly
    /// Neither send nor receive.
    case inactive

    /// The direction an answerer would use to mirror this offered direction
    /// (RFC 3264 section 6.1): `sendonly` ⇄ `recvonly`; the others are unchanged.
    public var reversed: MediaDirection {
        switch self {
        case .sendonly: return .recvonly
        case .recvonly: return .sendonly
        case .sendrecv, .inactive: return self
        }
    }

    /// True for `sendrecv` and `sendonly`.
    public var sends: Bool { self == .sendrecv || self == .sendonly }

    /// True for `sendrecv` and `recvonly`.
    public var receives: Bool { self == .sendrecv || self == .recvonly }

    /// The attribute name, for example `sendonly`.
    public var description: String { rawValue }
}
