/// A section of a session description that holds an ordered list of
/// attributes: the session level (``SessionDescription``) or one media
/// section (``MediaDescription``).
///
/// The typed accessors here are computed from ``attributes`` every time, so
/// the list stays the single source of truth and serialization reproduces
/// the attributes exactly, in order. Attribute values that do not decode
/// (possible only for values built by hand) are skipped by the typed
/// accessors.
public protocol SDPAttributeContainer {
    /// The `a=` lines of this section, in order.
    var attributes: [SDPAttribute] { get set }
}

extension SDPAttributeContainer {
    // MARK: Generic access

    /// All attributes called `name`, in order.
    public func attributes(named name: String) -> [SDPAttribute] {
        attributes.filter { $0.name == name }
    }

    /// The first attribute called `name`.
    public func firstAttribute(named name: String) -> SDPAttribute? {
        attributes.first { $0.name == name }
    }

    /// True when an attribute called `name` is present.
    public func hasAttribute(named name: String) -> Bool {
        attributes.contains { $0.name == name }
    }

    /// The value of the first attribute called `name` (nil when absent or a property attribute).
    public func attributeValue(named name: String) -> String? {
        firstAttribute(named: name)?.value
    }

    /// All decodable attributes of type `T`, in order.
    public func typedAttributes<T: SDPTypedAttribute>(_ type: T.Type) -> [T] {
        attributes.compactMap { $0.decode(as: T.self) }
    }

    /// Appends an attribute.
    public mutating func addAttribute(_ attribute: SDPAttribute) {
        attributes.append(attribute)
    }

    /// Appends an attribute given by name and optional value.
    public mutating func addAttribute(name: String, value: String? = nil) {
        attributes.append(SDPAttribute(name: name, value: value))
    }

    /// Appends a typed attribute, for example an ``RTPMap``, ``FormatParameters`` or ``CryptoAttribute``.
    public mutating func addAttribute(_ typed: some SDPTypedAttribute) {
        attributes.append(SDPAttribute(typed))
    }

    /// Removes every attribute called `name`; returns how many were removed.
    @discardableResult
    public mutating func removeAttributes(named name: String) -> Int {
        let before = attributes.count
        attributes.removeAll { $0.name == name }
        return before - attributes.count
    }

    /// Replaces the first attribute called `attribute.name` in place and
    /// removes any others with that name; appends it when there is none.
    public mutating func setAttribute(_ attribute: SDPAttribute) {
        replaceAll(where: { $0.name == attribute.name }, with: attribute)
    }

    /// Replaces the first attribute matching `predicate` with `replacement`
    /// (or appends it) and removes the other matches.
    mutating func replaceAll(where predicate: (SDPAttribute) -> Bool, with replacement: SDPAttribute?) {
        var result: [SDPAttribute] = []
        result.reserveCapacity(attributes.count + 1)
        var placed = false
        for attribute in attributes {
            if predicate(attribute) {
                if !placed, let replacement {
                    result.append(replacement)
                }
                placed = true
            } else {
                result.append(attribute)
            }
        }
        if !placed, let replacement { result.append(replacement) }
        attributes = result
    }

    // MARK: Direction (RFC 3264)

    /// The direction attribute of this section, if one is present (the first
    /// one if several are). Use ``SessionDescription/effectiveDirection(for:)``
    /// for the direction that applies to a media section after the
    /// session-level fallback and the `sendrecv` default.
    public var direction: MediaDirection? {
        for attribute in attributes where attribute.value == nil {
            if let direction = MediaDirection(rawValue: attribute.name) { return direction }
        }
        return nil
    }

    /// Sets the direction, replacing any existing direction attributes at the
    /// position of the first one (or appending); nil removes them all.
    public mutating func setDirection(_ direction: MediaDirection?) {
        replaceAll(
            where: { $0.value == nil && MediaDirection(rawValue: $0.name) != nil },
            with: direction.map { SDPAttribute(name: $0.rawValue) })
    }

    // MARK: Codecs

    /// All `a=rtpmap` attributes.
    public var rtpmaps: [RTPMap] { typedAttributes(RTPMap.self) }

    /// All `a=fmtp` attributes.
    public var fmtps: [FormatParameters] { typedAttributes(FormatParameters.self) }

    /// The first `a=rtpmap` for `payloadType`.
    public func rtpmap(forPayloadType payloadType: UInt8) -> RTPMap? {
        firstTyped(RTPMap.self) { $0.payloadType == payloadType }
    }

    /// The first `a=fmtp` for `format`.
    public func fmtp(forFormat format: String) -> FormatParameters? {
        firstTyped(FormatParameters.self) { $0.format == format }
    }

    /// The first `a=fmtp` for `payloadType`.
    public func fmtp(forPayloadType payloadType: UInt8) -> FormatParameters? {
        firstTyped(FormatParameters.self) { $0.payloadType == payloadType }
    }

    /// The first attribute of type `T` that `matches`, as `typedAttributes(T.self).first(where:)`
    /// finds it, without decoding the attributes after it nor building the list (asked per
    /// payload type while an offer is answered).
    private func firstTyped<T: SDPTypedAttribute>(_ type: T.Type, where matches: (T) -> Bool) -> T? {
        for attribute in attributes {
            if let typed = attribute.decode(as: T.self), matches(typed) { return typed }
        }
        return nil
    }

    /// `a=ptime` in milliseconds.
    public var ptime: Double? { packetTime(SDPAttributeName.ptime) }

    /// `a=maxptime` in milliseconds.
    public var maxptime: Double? { packetTime(SDPAttributeName.maxptime) }

    private func packetTime(_ name: String) -> Double? {
        guard let value = attributeValue(named: name) else { return nil }
        return try? SDPAttribute.packetTime(ArraySlice(value.utf8), name: name)
    }

    /// Sets `a=ptime` in milliseconds (replacing any existing one); nil removes it.
    public mutating func setPtime(_ milliseconds: UInt32?) {
        replaceAll(
            where: { $0.name == SDPAttributeName.ptime },
            with: milliseconds.map { SDPAttribute(name: SDPAttributeName.ptime, value: String($0)) })
    }

    // MARK: RTCP

    /// `a=rtcp` (RFC 3605).
    public var rtcp: RTCPAttribute? { typedAttributes(RTCPAttribute.self).first }

    /// True when `a=rtcp-mux` (RFC 5761) is present.
    public var isRTCPMuxed: Bool {
        attributes.contains { $0.name == SDPAttributeName.rtcpMux && $0.value == nil }
    }

    /// Adds or removes `a=rtcp-mux`.
    public mutating func setRTCPMux(_ enabled: Bool) {
        if enabled {
            if !isRTCPMuxed { addAttribute(name: SDPAttributeName.rtcpMux) }
        } else {
            removeAttributes(named: SDPAttributeName.rtcpMux)
        }
    }

    // MARK: Security and identification

    /// All `a=crypto` attributes (RFC 4568), in order of preference.
    public var cryptos: [CryptoAttribute] { typedAttributes(CryptoAttribute.self) }

    /// All `a=ssrc` attributes (RFC 5576).
    public var ssrcs: [SSRCAttribute] { typedAttributes(SSRCAttribute.self) }

    /// The `cname` source attribute of `ssrc`, if present.
    public func cname(forSSRC ssrc: UInt32) -> String? {
        ssrcs.first { $0.ssrc == ssrc && $0.name == "cname" }?.value
    }

    /// `a=mid` (RFC 5888).
    public var mid: String? { attributeValue(named: SDPAttributeName.mid) }

    /// `a=setup` (RFC 4145), verbatim, for example `actpass`.
    public var setup: String? { attributeValue(named: SDPAttributeName.setup) }

    /// `a=fingerprint` (RFC 8122), verbatim, for example `sha-256 AB:CD:...`.
    public var fingerprint: String? { attributeValue(named: SDPAttributeName.fingerprint) }

    /// `a=ice-ufrag` (RFC 8839).
    public var iceUfrag: String? { attributeValue(named: SDPAttributeName.iceUfrag) }

    /// `a=ice-pwd` (RFC 8839).
    public var icePwd: String? { attributeValue(named: SDPAttributeName.icePwd) }

    /// The values of all `a=candidate` attributes (RFC 8839), verbatim.
    public var candidates: [String] {
        attributes.compactMap { $0.name == SDPAttributeName.candidate ? $0.value : nil }
    }
}
