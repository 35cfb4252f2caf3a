import Glibc
import NetworkIO
import SIPResolver
import Synchronization

/// A tiny authoritative DNS server on 127.0.0.1, UDP and TCP on one random port, serving a zone
/// held in memory. Tests point a ``DNSClient`` at it; nothing ever leaves the loopback.
///
/// Answers: the records of the asked name and type; else a CNAME for the name, followed within
/// the zone (unless `chaseAliases` is off); else NODATA (name exists) or NXDOMAIN, both with
/// the zone's SOA in the authority section.
public final class LocalDNSServer: Sendable {
    public struct Options: Sendable {
        public init() {}
        /// Never answer.
        public var silent = false
        /// Names whose UDP answers carry TC=1 and no records (the full answer only over TCP).
        public var truncateOverUDP: Set<DNSName> = []
        /// Before each real answer, send one with a wrong ID and one with a wrong question.
        public var decoysFirst = false
        /// Answer every query with this RCODE and nothing else.
        public var responseCode: DNSResponseCode? = nil
        /// Follow CNAMEs inside the zone when answering.
        public var chaseAliases = true
        /// Send only the first 14 octets of each answer (the right ID, then garbage).
        public var cutAnswers = false
    }

    public struct LoggedQuery: Sendable, Hashable {
        public var question: DNSQuestion
        public var id: UInt16
        public var overTCP: Bool
        public var sourcePort: UInt16
    }

    public let zone: [DNSRecord]
    public let options: Options
    public let port: UInt16
    private let udp: Int32
    private let tcp: Int32
    private let state = Mutex<(log: [LoggedQuery], stopped: Bool, thread: IOThread?)>(([], false, nil))

    /// The address to configure a client with.
    public var address: SocketAddress { SocketAddress(.v4(IPv4Address(127, 0, 0, 1)), port: port) }

    /// The queries received so far, in order.
    public var queries: [LoggedQuery] { state.withLock { $0.log } }

    /// How many queries asked for `name` and `type` (over either transport).
    public func count(_ name: String, _ type: DNSRecordType) -> Int {
        let n = try! DNSName(name)
        return queries.filter { $0.question.name == n && $0.question.type == type }.count
    }

    public init(zone: [DNSRecord], options: Options = Options()) throws {
        self.zone = zone
        self.options = options
        var bound: (Int32, Int32, UInt16)? = nil
        for _ in 0..<20 {
            let u = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard u >= 0, LocalDNSServer.bind(u, port: 0) else { close(u); continue }
            let p = LocalDNSServer.localPort(u)
            let t = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var one: Int32 = 1
            setsockopt(t, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            if t >= 0, LocalDNSServer.bind(t, port: p), listen(t, 16) == 0 {
                bound = (u, t, p)
                break
            }
            close(u); close(t)
        }
        guard let (u, t, p) = bound else { throw TestFailure("could not bind a local DNS server") }
        udp = u
        tcp = t
        port = p
        let thread = try IOThread(name: "test-dns-\(p)") { [self] in run() }
        state.withLock { $0.thread = thread }
    }

    /// Stops the server thread and closes its sockets.
    public func stop() {
        let thread: IOThread? = state.withLock { s in
            let t = s.thread
            s.stopped = true
            s.thread = nil
            return t
        }
        thread?.join()
    }

    deinit {
        close(udp)
        close(tcp)
    }

    static func bind(_ fd: Int32, port: UInt16) -> Bool {
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_port = port.bigEndian
        sin.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return withUnsafePointer(to: &sin) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    static func localPort(_ fd: Int32) -> UInt16 {
        var sin = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &sin) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return UInt16(bigEndian: sin.sin_port)
    }

    private func run() {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while !state.withLock({ $0.stopped }) {
            var fds = [pollfd(fd: udp, events: Int16(POLLIN), revents: 0), pollfd(fd: tcp, events: Int16(POLLIN), revents: 0)]
            guard poll(&fds, 2, 20) > 0 else { continue }
            if fds[0].revents & Int16(POLLIN) != 0 {
                var from = sockaddr_in()
                var fromLength = socklen_t(MemoryLayout<sockaddr_in>.size)
                let n = buffer.withUnsafeMutableBytes { raw in
                    withUnsafeMutablePointer(to: &from) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(udp, raw.baseAddress, raw.count, 0, $0, &fromLength) }
                    }
                }
                if n > 0 {
                    for reply in answer(Array(buffer[0..<n]), overTCP: false, sourcePort: UInt16(bigEndian: from.sin_port)) {
                        _ = reply.withUnsafeBytes { raw in
                            withUnsafePointer(to: &from) {
                                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(udp, raw.baseAddress, raw.count, 0, $0, fromLength) }
                            }
                        }
                    }
                }
            }
            if fds[1].revents & Int16(POLLIN) != 0 {
                let c = accept(tcp, nil, nil)
                if c >= 0 {
                    serveTCP(c)
                    close(c)
                }
            }
        }
    }

    private func serveTCP(_ c: Int32) {
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        func readExactly(_ count: Int) -> [UInt8]? {
            var out = [UInt8](repeating: 0, count: count)
            var got = 0
            while got < count {
                let n = out.withUnsafeMutableBytes { recv(c, $0.baseAddress! + got, count - got, 0) }
                if n <= 0 { return nil }
                got += n
            }
            return out
        }
        guard let prefix = readExactly(2), let query = readExactly(Int(prefix[0]) << 8 | Int(prefix[1])) else { return }
        let port = LocalDNSServer.localPort(c)
        for reply in answer(query, overTCP: true, sourcePort: port) {
            let framed = [UInt8(reply.count >> 8), UInt8(reply.count & 0xFF)] + reply
            _ = framed.withUnsafeBytes { send(c, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
    }

    /// The datagrams (or TCP messages) to send back for one query.
    private func answer(_ bytes: [UInt8], overTCP: Bool, sourcePort: UInt16) -> [[UInt8]] {
        guard let query = try? DNSMessage(bytes: bytes), let question = query.questions.first else { return [] }
        state.withLock { $0.log.append(LoggedQuery(question: question, id: query.id, overTCP: overTCP, sourcePort: sourcePort)) }
        if options.silent { return [] }
        var response = DNSMessage(id: query.id, isResponse: true, isAuthoritative: true, recursionDesired: query.recursionDesired,
                                  recursionAvailable: true, questions: [question])
        if let code = options.responseCode {
            response.responseCode = code
        } else if !overTCP, options.truncateOverUDP.contains(question.name) {
            response.isTruncated = true
        } else {
            fill(&response, for: question)
        }
        var out = [[UInt8]]()
        if options.decoysFirst {
            var wrongID = response
            wrongID.id = query.id &+ 1
            wrongID.answers = wrongID.answers.map { var r = $0; r.data = .a(IPv4Address(192, 0, 2, 66)); return r }
            var wrongQuestion = response
            wrongQuestion.questions = [DNSQuestion(name: try! DNSName("decoy.invalid"), type: question.type)]
            out.append(try! wrongID.encoded())
            out.append(try! wrongQuestion.encoded())
            out.append([0xDE, 0xAD])
        }
        let wire = try! response.encoded()
        out.append(options.cutAnswers ? Array(wire.prefix(14)) : wire)
        return out
    }

    private func fill(_ response: inout DNSMessage, for question: DNSQuestion) {
        var name = question.name
        for _ in 0..<10 {
            let exact = zone.filter { $0.name == name && $0.type == question.type }
            if !exact.isEmpty {
                response.answers += exact
                return
            }
            if question.type != .cname, let alias = zone.first(where: { $0.name == name && $0.type == .cname }), case .cname(let target) = alias.data {
                response.answers.append(alias)
                guard options.chaseAliases else { return }
                name = target
                continue
            }
            break
        }
        response.authorities = zone.filter { $0.type == .soa }
        if !zone.contains(where: { $0.name == name }) { response.responseCode = .nameError }
    }
}

public struct TestFailure: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// A client configured for one local server, with short, bounded waits.
public func localClient(_ servers: [SocketAddress], timeout: Duration = .milliseconds(400), attempts: Int = 2, hosts: HostsFile? = nil) -> DNSClient {
    DNSClient(configuration: DNSClientConfiguration(nameservers: servers, timeout: timeout, attempts: attempts, hosts: hosts,
                                                    usesSystemResolverWithoutNameservers: false))
}

/// An address of 127.0.0.1 where nothing listens on UDP (a port bound, then released).
public func deadServerAddress() -> SocketAddress {
    SocketAddress(.v4(IPv4Address(127, 0, 0, 1)), port: freeUDPPort())
}

/// A UDP port of 127.0.0.1 free right now (bound, read, released): for a peer to start on, or,
/// left alone, an address where nothing answers.
public func freeUDPPort() -> UInt16 { freeLoopbackPort(Int32(SOCK_DGRAM.rawValue)) }

/// A port of 127.0.0.1 free right now for sockets of `type` (bound, read, released).
func freeLoopbackPort(_ type: Int32) -> UInt16 {
    let fd = socket(AF_INET, type | Int32(SOCK_CLOEXEC.rawValue), 0)
    _ = LocalDNSServer.bind(fd, port: 0)
    let port = LocalDNSServer.localPort(fd)
    close(fd)
    return port
}

public typealias SeededGenerator = TestRandom

/// Builds records tersely.
public enum Z {
    public static func name(_ s: String) -> DNSName { try! DNSName(s) }
    public static func a(_ n: String, _ ip: String, ttl: UInt32 = 300) -> DNSRecord {
        DNSRecord(name: name(n), ttl: ttl, data: .a(IPv4Address(ip)!))
    }
    public static func aaaa(_ n: String, _ ip: String, ttl: UInt32 = 300) -> DNSRecord {
        DNSRecord(name: name(n), ttl: ttl, data: .aaaa(IPv6Address(ip)!))
    }
    public static func cname(_ n: String, _ target: String, ttl: UInt32 = 300) -> DNSRecord {
        DNSRecord(name: name(n), ttl: ttl, data: .cname(name(target)))
    }
    public static func srv(_ n: String, _ priority: UInt16, _ weight: UInt16, _ port: UInt16, _ target: String, ttl: UInt32 = 300) -> DNSRecord {
        DNSRecord(name: name(n), ttl: ttl, data: .srv(DNSSRVRecord(priority: priority, weight: weight, port: port, target: name(target))))
    }
    public static func naptr(_ n: String, _ order: UInt16, _ preference: UInt16, _ services: String, _ replacement: String, flags: String = "s", ttl: UInt32 = 300) -> DNSRecord {
        DNSRecord(name: name(n), ttl: ttl, data: .naptr(DNSNAPTRRecord(order: order, preference: preference, flags: flags, services: services, replacement: name(replacement))))
    }
    public static func soa(_ n: String, minimum: UInt32 = 60, ttl: UInt32 = 60) -> DNSRecord {
        DNSRecord(name: name(n), ttl: ttl, data: .soa(DNSSOARecord(primaryServer: name("ns." + n), responsibleMailbox: name("hostmaster." + n),
                                                                  serial: 1, refresh: 3600, retry: 600, expire: 86400, minimum: minimum)))
    }
}

/// Writes `contents` to a new file under /tmp and returns its path.
public func temporaryFile(_ contents: String) -> String {
    var template = Array("/tmp/sipresolver-test-XXXXXX".utf8CString)
    let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
    precondition(fd >= 0, "mkstemp failed")
    let bytes = Array(contents.utf8)
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
    return String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
