/// What the server knows of a user's password.
public enum DigestSecret: Sendable, Hashable {
    /// The password itself.
    case password(String)
    /// The precomputed `H(username ":" realm ":" password)` (lower-case hex) under the hash of
    /// the algorithm asked for (its non-`-sess` variant).
    case ha1(String)
}

/// Where ``DigestServer`` finds users' secrets.
public protocol DigestCredentialStore: Sendable {
    /// The secret of `username` in `realm`, for `algorithm`; `nil` for an unknown user.
    func secret(username: String, realm: String, algorithm: DigestAlgorithm) -> DigestSecret?
    /// The user whose `H(username ":" realm)` under `algorithm` is `userhash` (RFC 7616
    /// §3.4.4); `nil` when unknown or when the store does not support hashed usernames.
    func username(userhash: String, realm: String, algorithm: DigestAlgorithm) -> String?
}

extension DigestCredentialStore {
    /// Hashed usernames are not supported unless a store implements this.
    public func username(userhash: String, realm: String, algorithm: DigestAlgorithm) -> String? { nil }
}

/// A store backed by a closure returning the secret for (username, realm, algorithm).
public struct DigestClosureStore: DigestCredentialStore {
    let lookup: @Sendable (String, String, DigestAlgorithm) -> DigestSecret?

    /// Creates a store from a lookup closure.
    public init(_ lookup: @escaping @Sendable (_ username: String, _ realm: String, _ algorithm: DigestAlgorithm) -> DigestSecret?) {
        self.lookup = lookup
    }

    /// Calls the closure.
    public func secret(username: String, realm: String, algorithm: DigestAlgorithm) -> DigestSecret? {
        lookup(username, realm, algorithm)
    }
}

/// An in-memory table of passwords (the same in every realm); supports hashed usernames by
/// hashing each known name (linear in the table size; meant for tests and small deployments).
public struct DigestPasswordTable: DigestCredentialStore {
    /// Username → password.
    public var passwords: [String: String]

    /// Creates a table.
    public init(_ passwords: [String: String]) { self.passwords = passwords }

    /// The user's password, whatever the realm.
    public func secret(username: String, realm: String, algorithm: DigestAlgorithm) -> DigestSecret? {
        passwords[username].map { .password($0) }
    }

    /// The user whose hashed name is `userhash`, found by hashing every name in the table.
    public func username(userhash: String, realm: String, algorithm: DigestAlgorithm) -> String? {
        let wanted = userhash.lowercased()
        return passwords.keys.sorted().first { DigestComputation.userhash(algorithm, username: $0, realm: realm) == wanted }
    }
}
