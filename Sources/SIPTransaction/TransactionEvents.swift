import SIPMessage

/// What a client transaction (``InviteClientTransaction``, ``NonInviteClientTransaction``) is fed.
public enum ClientTransactionInput: Sendable {
    /// A response matched to this transaction.
    case response(SIPMessage)
    /// A timer the driver started has fired.
    case timer(TransactionTimer)
    /// The transport could not send.
    case transportError
}

/// What a server transaction (``InviteServerTransaction``, ``NonInviteServerTransaction``) is fed.
public enum ServerTransactionInput: Sendable {
    /// A request matched to this transaction: a retransmission of the request, or (INVITE) an ACK.
    case request(SIPMessage)
    /// The TU sends a response.
    case send(SIPMessage)
    /// A timer the driver started has fired.
    case timer(TransactionTimer)
    /// The transport could not send.
    case transportError
}
