import SDP
import PacketCapture
import NetworkIO

/// An SRTP key given for a capture's analysis (`--srtp-key SUITE:INLINE-KEY[@HOST:PORT]`): an
/// SDES crypto suite and `inline:` key (RFC 4568 §6.1), optionally for the packets one sender
/// (HOST:PORT, the stream's source) sends.
public struct SRTPCaptureKey: Sendable, Hashable, CustomStringConvertible {
    /// The suite and key, as an `a=crypto` line (tag 1).
    public var crypto: CryptoAttribute
    /// The sender whose packets it protects; `nil`: every SRTP stream without a key from its SDP.
    public var source: CaptureEndpoint?

    /// A key.
    public init(crypto: CryptoAttribute, source: CaptureEndpoint? = nil) {
        self.crypto = crypto
        self.source = source
    }

    /// Why a key argument was refused.
    public struct ParseError: Error, Sendable, Hashable, CustomStringConvertible {
        /// The argument.
        public var argument: String
        /// What was wrong.
        public var reason: String
        /// An error for `argument`.
        public init(argument: String, reason: String) {
            self.argument = argument
            self.reason = reason
        }
        /// `bad SRTP key "…": reason`.
        public var description: String { "bad SRTP key \"\(argument)\": \(reason)" }
    }

    /// Parses `SUITE:KEY[@HOST:PORT]`: `KEY` is the base64 `key||salt` (optionally written
    /// `inline:KEY`, and with `|lifetime|MKI:length` as in `a=crypto`); HOST is an IPv4 address
    /// or a bracketed IPv6 one. The key's length is checked against the suite when the
    /// analysis uses it (``RTPStreamAnalyzer``), and by ``validate()``.
    public init(parsing text: String) throws(ParseError) {
        var body = Substring(text)
        var source: CaptureEndpoint?
        if let at = body.lastIndex(of: "@") {
            let target = body[body.index(after: at)...]
            body = body[..<at]
            guard let colon = target.lastIndex(of: ":"), let port = UInt16(target[target.index(after: colon)...]), port != 0 else {
                throw ParseError(argument: text, reason: "\(target) is not HOST:PORT")
            }
            var host = target[..<colon]
            if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
            guard let address = MediaCounter.ipAddress(String(host)) else {
                throw ParseError(argument: text, reason: "\(host) is not an IP address")
            }
            source = CaptureEndpoint(address: address, port: port)
        }
        guard let colon = body.firstIndex(of: ":"), colon != body.startIndex else {
            throw ParseError(argument: text, reason: "expected SUITE:KEY (for example AES_CM_128_HMAC_SHA1_80:base64)")
        }
        let suite = body[..<colon]
        var key = body[body.index(after: colon)...]
        if key.hasPrefix("inline:") { key = key.dropFirst(7) }
        guard !key.isEmpty, let crypto = CryptoAttribute(attributeValue: "1 \(suite) inline:\(key)") else {
            throw ParseError(argument: text, reason: "not a crypto suite and inline key")
        }
        guard crypto.keyParameters.first?.keySaltBytes != nil else { throw ParseError(argument: text, reason: "the key is not base64") }
        self.init(crypto: crypto, source: source)
    }

    /// `SUITE:…@HOST:PORT`, never the key.
    public var description: String { "\(crypto.suite):…" + (source.map { "@\($0)" } ?? "") }
}

/// How SRTP streams of a capture are decrypted.
public struct SRTPCaptureOptions: Sendable, Hashable {
    /// Keys from the command line; one with a source is used for that sender's streams before
    /// any SDP key.
    public var keys: [SRTPCaptureKey]
    /// Whether the keys of the capture's own SDP (`a=crypto`) are used.
    public var useSDPKeys: Bool

    /// Options: by default, the SDP's keys only.
    public init(keys: [SRTPCaptureKey] = [], useSDPKeys: Bool = true) {
        self.keys = keys
        self.useSDPKeys = useSDPKeys
    }
}

/// What became of an SRTP stream's packets (``RTPStreamAnalyzer/Stream/srtp``).
public struct SRTPStreamStatus: Sendable, Hashable {
    /// Where the key that decrypted the stream came from.
    public enum KeySource: String, Sendable, Hashable {
        /// The capture's SDP (`a=crypto` of the sending side).
        case sdp
        /// `--srtp-key`.
        case commandLine = "command-line"
    }
    /// The crypto suite of the key that decrypted the stream's packets (of the first key tried
    /// when none did); `nil` when no key was known.
    public var suite: String?
    /// Where that key came from.
    public var keySource: KeySource?
    /// Packets that decrypted and authenticated.
    public var decrypted: Int
    /// Packets whose authentication tag verified with no key known for the stream (forged,
    /// corrupt, or the wrong key). They are counted in the sequence figures (the header is
    /// clear text) but their payload is not used (no audio, digits or silence check).
    public var authenticationFailures: Int
    /// Packets libsrtp's replay check refused (captured twice): counted, payload unused.
    public var replayed: Int
    /// Whether no key was known: the stream is on an SRTP profile, its payloads unused.
    public var noKey: Bool { suite == nil }
    /// Whether every packet failed authentication: the key is wrong.
    public var wrongKey: Bool { suite != nil && decrypted == 0 && authenticationFailures > 0 }

    /// A status.
    public init(suite: String?, keySource: KeySource?, decrypted: Int, authenticationFailures: Int, replayed: Int) {
        self.suite = suite
        self.keySource = keySource
        self.decrypted = decrypted
        self.authenticationFailures = authenticationFailures
        self.replayed = replayed
    }
}
