import SIPMessage

/// How ``Phone/dial(_:options:)`` places a call, beyond its target.
public struct CallOptions: Sendable {
    /// Key-value data for the callee (``Call/attachedData`` on its side).
    public var attachedData: CallData
    /// A one-time session token for registration-free dialing (Cloudonix's
    /// `dialRegistrationFree`): the service that issued it authorizes the INVITE by it instead of
    /// a REGISTER and a digest challenge. Sent in ``tokenHeader``.
    public var sessionToken: String?
    /// Where the token goes: `Authorization` (as `Bearer TOKEN`, RFC 8898) by default, or a header
    /// of the service's own (the bare token).
    public var tokenHeader: SIPHeaderName
    /// The application's label for the call (``Call/tag``); never sent.
    public var tag: String?
    /// More headers for the INVITE.
    public var headers: [(SIPHeaderName, String)]

    public init(attachedData: CallData = [:], sessionToken: String? = nil, tokenHeader: SIPHeaderName = .authorization,
                tag: String? = nil, headers: [(SIPHeaderName, String)] = []) {
        self.attachedData = attachedData
        self.sessionToken = sessionToken
        self.tokenHeader = tokenHeader
        self.tag = tag
        self.headers = headers
    }
}
