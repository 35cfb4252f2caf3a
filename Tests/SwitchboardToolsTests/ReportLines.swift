import Synchronization

/// The report lines of the phones in a test (state changes, offers, answers, traces), shared
/// between the phones' event tasks and the test.
final class ReportLines: Sendable {
    private let list = Mutex<[String]>([])
    func append(_ l: String) { list.withLock { $0.append(l) } }
    var all: [String] { list.withLock { $0 } }
    func contains(_ l: String) -> Bool { all.contains(l) }
    /// Lines that start with `prefix` (report lines end with details such as the codec).
    func count(_ prefix: String) -> Int { all.filter { $0.hasPrefix(prefix) }.count }
}
