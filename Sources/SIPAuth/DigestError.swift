/// Why the client could not answer a challenge.
public enum DigestError: Error, Sendable, Hashable {
    /// No challenge used the Digest scheme; carries the first scheme seen (empty if none).
    case unsupportedScheme(String)
    /// The Digest challenges named only algorithms this client does not support.
    case unsupportedAlgorithm(String)
    /// The challenge offered only qop values this client does not support.
    case unsupportedQOP(String)
    /// A challenge lacked a required parameter or was otherwise unusable.
    case malformedChallenge(String)
    /// No credentials are configured for the realm.
    case noCredentials(realm: String)
    /// The realm was answered already and challenged again without `stale=true`: the
    /// credentials were rejected, and answering again would loop.
    case credentialsRejected(realm: String)
}
