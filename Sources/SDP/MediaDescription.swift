/// One media section: an `m=` line and the `i=`, `c=`, `b=`, `k=` and `a=`
/// lines that follow it (RFC 8866 section 5.14).
///
/// ```swift
/// var audio = MediaDescription(media: .audio, port: 49170, proto: .rtpAVP, formats: [])
/// audio.addCodec(RTPMap(payloadType: 0, encodingName: "PCMU", clockRate: 8000))
/// audio.addCodec(RTPMap(payloadType: 101, encodingName: "telephone-event", clockRate: 8000),
///                parameters: "0-16")
/// audio.setDirection(.sendrecv)
/// ```
public struct MediaDescription: Hashable, Sendable, SDPAttributeContainer {
    /// The media type, for example ``MediaType/audio``.
    public var media: MediaType
    /// The transport port; 0 rejects or disables the stream (RFC 3264 section 6).
    public var port: UInt16
    /// The number of ports (`m=video 49170/2 ...`), when given.
    public var portCount: UInt16?
    /// The transport protocol, for example ``TransportProtocol/rtpSAVP``.
    public var proto: TransportProtocol
    /// The media formats in preference order: RTP payload type numbers for
    /// RTP protocols, other tokens otherwise. Must not be empty when serialized.
    public var formats: [String]
    /// The `i=` line.
    public var information: String?
    /// The `c=` lines of this section (more than one only for multicast).
    public var connections: [Connection]
    /// The `b=` lines of this section.
    public var bandwidths: [Bandwidth]
    /// The `k=` line, verbatim (obsolete in RFC 8866).
    public var key: String?
    /// The `a=` lines of this section, in order.
    public var attributes: [SDPAttribute]
    /// Lines with unknown type letters, in order; serialized after the attributes.
    public var extensionLines: [SDPExtensionLine]

    /// Creates a media section.
    public init(
        media: MediaType,
        port: UInt16,
        portCount: UInt16? = nil,
        proto: TransportProtocol,
        formats: [String],
        information: String? = nil,
        connections: [Connection] = [],
        bandwidths: [Bandwidth] = [],
        key: String? = nil,
        attributes: [SDPAttribute] = [],
        extensionLines: [SDPExtensionLine] = []
    ) {
        self.media = media
        self.port = port
        self.portCount = portCount
        self.proto = proto
        self.formats = formats
        self.information = information
        self.connections = connections
        self.bandwidths = bandwidths
        self.key = key
        self.attributes = attributes
        self.extensionLines = extensionLines
    }

    /// Creates an RTP media section whose formats are the given payload types.
    public init(media: MediaType, port: UInt16, proto: TransportProtocol, payloadTypes: [UInt8]) {
        self.init(media: media, port: port, proto: proto, formats: payloadTypes.map { String($0) })
    }

    /// The formats that are RTP payload type numbers (0–127), in order.
    public var payloadTypes: [UInt8] {
        formats.compactMap { format in
            guard let pt = Syntax.decimal(ArraySlice(format.utf8), as: UInt8.self), pt <= 127 else { return nil }
            return pt
        }
    }

    /// The codec for `payloadType`: its `a=rtpmap`, or for static payload
    /// types without one, the RFC 3551 assignment (for example 0 → PCMU/8000).
    public func codec(forPayloadType payloadType: UInt8) -> RTPMap? {
        rtpmap(forPayloadType: payloadType) ?? RTPMap.staticPayloadType(payloadType)
    }

    /// The codecs of all payload types in the `m=` line, in preference order;
    /// payload types with no known codec are left out.
    public var codecs: [RTPMap] { payloadTypes.compactMap { codec(forPayloadType: $0) } }

    /// True when the port is 0 (a rejected or disabled stream).
    public var isRejected: Bool { port == 0 }

    /// Rejects or disables the stream by setting the port to 0 (RFC 3264
    /// section 6), leaving the formats in place as the grammar requires.
    public mutating func reject() {
        port = 0
        portCount = nil
    }

    /// Adds a codec: appends its payload type to ``formats`` if absent, then
    /// appends `a=rtpmap` and, when `parameters` is given, `a=fmtp`.
    public mutating func addCodec(_ rtpmap: RTPMap, parameters: String? = nil) {
        let format = String(rtpmap.payloadType)
        if !formats.contains(format) { formats.append(format) }
        addAttribute(rtpmap)
        if let parameters {
            addAttribute(FormatParameters(format: format, parameters: parameters))
        }
    }

    /// Removes a format from ``formats`` together with its `a=rtpmap` and `a=fmtp` attributes.
    public mutating func removeFormat(_ format: String) {
        formats.removeAll { $0 == format }
        attributes.removeAll { attribute in
            guard attribute.name == SDPAttributeName.rtpmap || attribute.name == SDPAttributeName.fmtp,
                let value = attribute.value
            else { return false }
            let bytes = Syntax.trimmed(ArraySlice(value.utf8))
            let end = bytes.firstIndex(where: ASCII.isWhitespace) ?? bytes.endIndex
            return Syntax.string(bytes[bytes.startIndex..<end]) == format
        }
    }
}
