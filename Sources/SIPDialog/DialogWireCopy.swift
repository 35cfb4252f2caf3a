import SIPMessage

/// A message a dialog keeps for a rare second use, held as its wire bytes only: the ACK sent
/// again for each retransmitted 2xx (RFC 3261 §13.2.2.4), the trimmed INVITE that makes the
/// dialog of a late fork's 2xx. A ``SIPMessage`` built by appending carries its header index
/// and spare buffer capacity (about 1 KB for an ACK); the serialized bytes are a third of that,
/// and parsing them again happens only when the copy is used.
struct DialogWireCopy: Sendable {
    private let bytes: [UInt8]

    init(_ message: SIPMessage) {
        bytes = message.serialized()
    }

    /// The message again, as sent (its serialized bytes unchanged). `nil` only if the bytes
    /// the message serialized to do not parse, which a message we built never does.
    var message: SIPMessage? { try? SIPMessage(bytes: bytes) }
}
