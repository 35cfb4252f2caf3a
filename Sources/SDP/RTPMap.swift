/// `a=rtpmap:<payload type> <encoding name>/<clock rate>[/<encoding parameters>]`
/// (RFC 8866 section 6.6): maps an RTP payload type to a codec.
///
/// Also used for the static payload types of RFC 3551, which need no
/// `a=rtpmap` line; see ``staticPayloadType(_:)``.
public struct RTPMap: SDPTypedAttribute, CustomStringConvertible {
    /// `rtpmap`
    public static let attributeName = SDPAttributeName.rtpmap

    /// The RTP payload type, 0–127.
    public var payloadType: UInt8
    /// The encoding name, for example `PCMU`, `opus` or `telephone-event`.
    /// Compare case-insensitively (see ``matches(_:)``).
    public var encodingName: String
    /// The RTP clock rate in Hz.
    public var clockRate: UInt32
    /// The encoding parameters; for audio, the number of channels. Nil when omitted (which means one channel for audio).
    public var channels: UInt8?

    /// Creates an rtpmap.
    public init(payloadType: UInt8, encodingName: String, clockRate: UInt32, channels: UInt8? = nil) {
        self.payloadType = payloadType
        self.encodingName = encodingName
        self.clockRate = clockRate
        self.channels = channels
    }

    /// Parses the value of an `a=rtpmap` line; nil when malformed.
    public init?(attributeValue: String) {
        guard let parsed = try? Self.parse(ArraySlice(attributeValue.utf8)) else { return nil }
        self = parsed
    }

    /// For example `0 PCMU/8000` or `111 opus/48000/2`.
    public var attributeValue: String {
        var text = "\(payloadType) \(encodingName)/\(clockRate)"
        if let channels { text += "/\(channels)" }
        return text
    }

    /// The same as ``attributeValue``.
    public var description: String { attributeValue }

    /// True when `other` describes the same codec: equal encoding names
    /// ignoring ASCII case, equal clock rates, and equal channel counts
    /// (a missing count counts as 1). Payload types are not compared.
    public func matches(_ other: RTPMap) -> Bool {
        encodingName.lowercased() == other.encodingName.lowercased()
            && clockRate == other.clockRate
            && (channels ?? 1) == (other.channels ?? 1)
    }

    /// The codec a static RTP/AVP payload type stands for when no rtpmap is
    /// given (RFC 3551 tables 4 and 5), or nil for unassigned or dynamic
    /// payload types.
    public static func staticPayloadType(_ payloadType: UInt8) -> RTPMap? {
        let entry: (String, UInt32, UInt8?)
        switch payloadType {
        case 0: entry = ("PCMU", 8000, nil)
        case 3: entry = ("GSM", 8000, nil)
        case 4: entry = ("G723", 8000, nil)
        case 5: entry = ("DVI4", 8000, nil)
        case 6: entry = ("DVI4", 16000, nil)
        case 7: entry = ("LPC", 8000, nil)
        case 8: entry = ("PCMA", 8000, nil)
        case 9: entry = ("G722", 8000, nil)
        case 10: entry = ("L16", 44100, 2)
        case 11: entry = ("L16", 44100, nil)
        case 12: entry = ("QCELP", 8000, nil)
        case 13: entry = ("CN", 8000, nil)
        case 14: entry = ("MPA", 90000, nil)
        case 15: entry = ("G728", 8000, nil)
        case 16: entry = ("DVI4", 11025, nil)
        case 17: entry = ("DVI4", 22050, nil)
        case 18: entry = ("G729", 8000, nil)
        case 25: entry = ("CelB", 90000, nil)
        case 26: entry = ("JPEG", 90000, nil)
        case 28: entry = ("nv", 90000, nil)
        case 31: entry = ("H261", 90000, nil)
        case 32: entry = ("MPV", 90000, nil)
        case 33: entry = ("MP2T", 90000, nil)
        case 34: entry = ("H263", 90000, nil)
        default: return nil
        }
        return RTPMap(payloadType: payloadType, encodingName: entry.0, clockRate: entry.1, channels: entry.2)
    }

    static func parse(_ value: ArraySlice<UInt8>) throws(FieldError) -> RTPMap {
        let fields = Syntax.fields(value)
        guard let first = fields.first else { throw FieldError(.rtpmap, "missing payload type", at: value.startIndex) }
        let payloadType: UInt8 = try Syntax.number(first, "payload type", rule: .rtpmap, max: 127)
        guard fields.count >= 2 else { throw FieldError(.rtpmap, "missing encoding name", at: first.endIndex) }
        guard fields.count == 2 else {
            throw FieldError(.rtpmap, "unexpected text after encoding", at: fields[2].startIndex)
        }
        let parts = Syntax.split(fields[1], on: ASCII.slash)
        guard Syntax.isToken(parts[0]) else {
            throw FieldError(.rtpmap, "invalid encoding name", at: parts[0].startIndex)
        }
        guard parts.count >= 2 else { throw FieldError(.rtpmap, "missing clock rate", at: fields[1].startIndex) }
        guard parts.count <= 3 else {
            throw FieldError(.rtpmap, "too many '/' separated parts", at: parts[3].startIndex)
        }
        let clockRate: UInt32 = try Syntax.number(parts[1], "clock rate", rule: .rtpmap)
        var channels: UInt8? = nil
        if parts.count == 3 {
            channels = try Syntax.number(parts[2], "encoding parameters", rule: .rtpmap)
        }
        return RTPMap(
            payloadType: payloadType, encodingName: Syntax.string(parts[0]), clockRate: clockRate,
            channels: channels)
    }
}
