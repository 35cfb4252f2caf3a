import SIPMessage

/// What a call directory knows of a caller.
public enum CallDirectoryEntry: Sendable, Hashable {
    /// Calls from this number are refused without alerting the application.
    case blocked
    /// Calls from this number carry this label (``Call/label``).
    case identified(label: String)
}

/// Blocked numbers and identification labels, looked up by the caller's number before an
/// incoming call reaches the application — the server-side form of CallKit's call directory
/// extension. Numbers are the caller's digits as an integer (E.164 without the `+`).
public protocol CallDirectory: Sendable {
    /// The entry for `number`, or nil when the directory does not know it.
    func entry(for number: UInt64) async -> CallDirectoryEntry?
}

/// Why a directory could not be loaded.
public enum CallDirectoryError: Error, Sendable, Hashable {
    /// Entries must come in ascending numeric order (as CallKit requires); this one does not.
    case notAscending(list: String, index: Int)
    /// A number appears twice in one list.
    case duplicate(list: String, number: UInt64)
}

/// A directory loaded once from two ascending lists and searched by bisection. A number both
/// blocked and identified is blocked.
public struct SortedCallDirectory: CallDirectory {
    private let blocked: [UInt64]
    private let identified: [(number: UInt64, label: String)]

    /// - Throws: ``CallDirectoryError`` when a list is not in strictly ascending order.
    public init(blocking: [UInt64], identification: [(UInt64, String)]) throws(CallDirectoryError) {
        try Self.check(blocking, "blocking")
        try Self.check(identification.map(\.0), "identification")
        blocked = blocking
        identified = identification.map { (number: $0.0, label: $0.1) }
    }

    private static func check(_ numbers: [UInt64], _ list: String) throws(CallDirectoryError) {
        for i in numbers.indices.dropFirst() {
            if numbers[i] == numbers[i - 1] { throw .duplicate(list: list, number: numbers[i]) }
            if numbers[i] < numbers[i - 1] { throw .notAscending(list: list, index: i) }
        }
    }

    /// The index of the first element not below `number`.
    private static func lowerBound(_ count: Int, _ key: (Int) -> UInt64, _ number: UInt64) -> Int {
        var lo = 0, hi = count
        while lo < hi {
            let mid = (lo + hi) / 2
            if key(mid) < number { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    public func entry(for number: UInt64) async -> CallDirectoryEntry? {
        let b = Self.lowerBound(blocked.count, { blocked[$0] }, number)
        if b < blocked.count, blocked[b] == number { return .blocked }
        let i = Self.lowerBound(identified.count, { identified[$0].number }, number)
        if i < identified.count, identified[i].number == number { return .identified(label: identified[i].label) }
        return nil
    }
}

/// How a phone screens incoming calls before alerting the application: do-not-disturb and a
/// call directory. A screened call is answered at once with the configured status and never
/// appears in ``Phone/incomingCallStream``; it is logged.
public struct CallScreening: Sendable {
    /// Refuse every incoming call (with ``doNotDisturbStatus``).
    public var doNotDisturb: Bool
    /// Looked up by the caller's number (P-Asserted-Identity, else From).
    public var directory: (any CallDirectory)?
    /// The answer to a blocked number: 603 Decline by default (486 Busy Here also common).
    public var blockedStatus: Int
    /// The answer while do-not-disturb is on: 486 Busy Here by default (480 also common).
    public var doNotDisturbStatus: Int

    public init(doNotDisturb: Bool = false, directory: (any CallDirectory)? = nil, blockedStatus: Int = 603,
                doNotDisturbStatus: Int = 486) {
        self.doNotDisturb = doNotDisturb
        self.directory = directory
        self.blockedStatus = blockedStatus
        self.doNotDisturbStatus = doNotDisturbStatus
    }

    /// The caller's number as the directory keys it: the digits of the user part of the first
    /// P-Asserted-Identity, else of the From (sip, sips or tel; a leading `+` and the visual
    /// separators `-`, `.`, `(`, `)` dropped); nil when it is not 1 to 15 digits (a name).
    public static func callerNumber(of invite: SIPMessage) -> UInt64? {
        let identities = ((try? invite.pAssertedIdentity()) ?? []).map(\.uri)
        for uri in identities + [(try? invite.from())?.uri].compactMap({ $0 }) {
            let text: String
            switch uri {
            case .sip(let u): text = u.user ?? ""
            case .tel(let t): text = t.number
            default: continue
            }
            let user = text.split(separator: ";", maxSplits: 1).first.map(String.init) ?? ""
            var digits = Substring(user)
            if digits.hasPrefix("+") { digits = digits.dropFirst() }
            let kept = digits.filter { !"-.()".contains($0) }
            guard (1...15).contains(kept.count), kept.allSatisfy(\.isASCII), kept.allSatisfy(\.isNumber), let n = UInt64(kept) else { continue }
            return n
        }
        return nil
    }
}
