import NetworkIO
import SIPMessage

/// The names in a peer's certificate, read after the TLS handshake, and the RFC 5922 rules
/// that turn them into SIP domain identities.
public struct TLSPeerCertificate: Sendable, Hashable {
    /// The subjectAltName entries of type dNSName.
    public var dnsNames: [String]
    /// The subjectAltName entries of type uniformResourceIdentifier (`sip:example.com`).
    public var uris: [String]
    /// The subjectAltName entries of type iPAddress, in text form.
    public var ipAddresses: [String]
    /// The commonName attributes of the subject.
    public var commonNames: [String]
    /// Whether the certificate has a subjectAltName extension at all.
    public var hasSubjectAltName: Bool

    /// Creates a description of a certificate's names.
    public init(dnsNames: [String] = [], uris: [String] = [], ipAddresses: [String] = [], commonNames: [String] = [], hasSubjectAltName: Bool? = nil) {
        self.dnsNames = dnsNames
        self.uris = uris
        self.ipAddresses = ipAddresses
        self.commonNames = commonNames
        self.hasSubjectAltName = hasSubjectAltName ?? !(dnsNames.isEmpty && uris.isEmpty && ipAddresses.isEmpty)
    }

    /// The SIP domain identities the certificate asserts (RFC 5922 §7.1): the host of each
    /// subjectAltName URI of scheme `sip` without a user part, each dNSName, and, only when the
    /// certificate has no subjectAltName extension, each commonName.
    public var sipDomainIdentities: [String] {
        guard hasSubjectAltName else { return commonNames }
        var identities: [String] = []
        for text in uris {
            guard text.utf8.count > 4, text.prefix(4).lowercased() == "sip:",
                  let uri = try? SIPURI(text), !uri.secure, uri.user == nil,
                  case .domain(let host) = uri.host else { continue }
            identities.append(host)
        }
        identities.append(contentsOf: dnsNames)
        return identities
    }

    /// Whether the certificate identifies the SIP domain (or host) `domain` (RFC 5922 §7.2):
    /// the names are compared as whole DNS names, case-insensitively; no wildcard, suffix or
    /// leading-dot matching.
    public func identifies(domain: String) -> Bool {
        let wanted = Self.normalized(domain)
        guard !wanted.isEmpty else { return false }
        return sipDomainIdentities.contains { Self.normalized($0) == wanted }
    }

    /// Whether the certificate names the IP address `address` (the port is ignored) in an
    /// iPAddress subjectAltName.
    public func identifies(address: SocketAddress) -> Bool {
        ipAddresses.contains { text in
            guard let named = try? SocketAddress(ip: text, port: address.port) else { return false }
            return named == address
        }
    }

    /// A short list of the names, for error messages: `DNS:a.example, URI:sip:example.com, IP:192.0.2.1, CN:x`.
    public var summary: String {
        var parts = dnsNames.map { "DNS:\($0)" } + uris.map { "URI:\($0)" } + ipAddresses.map { "IP:\($0)" }
        if !hasSubjectAltName { parts += commonNames.map { "CN:\($0)" } }
        return parts.isEmpty ? "no names" : parts.joined(separator: ", ")
    }

    /// A DNS name lower-cased (ASCII only: names in certificates are A-labels) without one
    /// trailing dot.
    static func normalized(_ name: String) -> String {
        var bytes = Array(name.utf8)
        if bytes.last == UInt8(ascii: ".") { bytes.removeLast() }
        for i in bytes.indices where bytes[i] >= UInt8(ascii: "A") && bytes[i] <= UInt8(ascii: "Z") { bytes[i] += 32 }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// What is known of a TLS connection once its handshake has completed.
public struct TLSSessionInfo: Sendable, Hashable {
    /// The protocol version negotiated (`"TLSv1.3"`, `"TLSv1.2"`).
    public var protocolVersion: String
    /// The cipher suite negotiated, in OpenSSL's naming (`"TLS_AES_256_GCM_SHA384"`).
    public var cipherSuite: String
    /// The peer's certificate, when it sent one.
    public var peerCertificate: TLSPeerCertificate?
    /// Whether the peer's certificate chain was verified against the trusted certificates
    /// (always for servers we connect to with ``TLSConfiguration/verifyPeer``; for clients
    /// when ``TLSConfiguration/clientCertificates`` asks for one and they sent one).
    public var peerVerified: Bool
    /// The server name: the one we asked for (and checked) on outbound connections, the one the
    /// client sent in its SNI extension on inbound ones.
    public var serverName: String?

    /// Creates a description of a TLS session.
    public init(protocolVersion: String, cipherSuite: String, peerCertificate: TLSPeerCertificate?, peerVerified: Bool, serverName: String?) {
        self.protocolVersion = protocolVersion
        self.cipherSuite = cipherSuite
        self.peerCertificate = peerCertificate
        self.peerVerified = peerVerified
        self.serverName = serverName
    }
}
