import Glibc
import NetworkIO

/// The static host table of `/etc/hosts`: lines of an address followed by names, `#` starting
/// a comment. Consulted by ``DNSClient`` for A and AAAA before any query, as the system
/// resolver would.
public struct HostsFile: Sendable, Hashable {
    var v4: [DNSName: [IPv4Address]] = [:]
    var v6: [DNSName: [IPv6Address]] = [:]

    /// Parses hosts-file text. Lines that do not start with an IP address, names that are not
    /// valid domain names and IPv6 addresses with a zone (`fe80::1%eth0`) are skipped.
    public init(contents: String) {
        for line in contents.split(whereSeparator: { $0 == "\n" || $0 == "\r" }) {
            let text = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let fields = text.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard fields.count >= 2, let address = IPAddress(String(fields[0])), !fields[0].hasPrefix("[") else { continue }
            for field in fields.dropFirst() {
                guard let name = try? DNSName(String(field)) else { continue }
                switch address {
                case .v4(let a): if !(v4[name]?.contains(a) ?? false) { v4[name, default: []].append(a) }
                case .v6(let a): if !(v6[name]?.contains(a) ?? false) { v6[name, default: []].append(a) }
                }
            }
        }
    }

    /// Reads and parses a hosts file; `nil` when it cannot be read. At most 1 MiB is read.
    public init?(path: String) {
        guard let bytes = readSmallFile(path, limit: 1 << 20) else { return nil }
        self.init(contents: String(decoding: bytes, as: UTF8.self))
    }

    /// The addresses listed for `name`, IPv4 first, in file order.
    public func addresses(for name: DNSName) -> [IPAddress] {
        (v4[name] ?? []).map(IPAddress.v4) + (v6[name] ?? []).map(IPAddress.v6)
    }

    /// The entries for `name` as A or AAAA records with a TTL of zero.
    func records(for name: DNSName, type: DNSRecordType) -> [DNSRecord] {
        switch type {
        case .a: return (v4[name] ?? []).map { DNSRecord(name: name, ttl: 0, data: .a($0)) }
        case .aaaa: return (v6[name] ?? []).map { DNSRecord(name: name, ttl: 0, data: .aaaa($0)) }
        default: return []
        }
    }
}

/// Reads a whole file of at most `limit` bytes; `nil` when it cannot be opened or read, or is larger.
func readSmallFile(_ path: String, limit: Int) -> [UInt8]? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var out = [UInt8]()
    var chunk = [UInt8](repeating: 0, count: 16_384)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 {
            if errno == EINTR { continue }
            return nil
        }
        if n == 0 { return out }
        out.append(contentsOf: chunk[0..<n])
        if out.count > limit { return nil }
    }
}
