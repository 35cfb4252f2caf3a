import NetworkIO

/// The SIPp command-line options this runner accepts, parsed from SIPp's own syntax
/// (`-sf FILE`, `-sn uac`, `host:port`, …) so that a script can swap `sipp` for
/// `switchboard sipp`.
public struct SIPpOptions: Sendable {
    /// Where the scenario comes from.
    public enum ScenarioSource: Sendable, Hashable {
        /// `-sf FILE`.
        case file(String)
        /// `-sn NAME`: a built-in scenario (`uac` or `uas`).
        case builtIn(String)
    }
    /// `-sf` or `-sn` (default: `-sn uac` when a remote host is given, else `uas`; SIPp's
    /// default is the uac, this runner asks for one explicitly when no remote host is given).
    public var scenario: ScenarioSource?
    /// The remote `host:port` (port 5060 by default).
    public var remote: SocketAddress?
    /// `-i`: the local IP address bound and written as `[local_ip]` (default 127.0.0.1).
    public var localIP = "127.0.0.1"
    /// `-p`: the local port (default 5060, or any free port when 5060 is taken).
    public var localPort: UInt16?
    /// `-s`: the `[service]` (user part of the Request-URI), default `service`.
    public var service = "service"
    /// `-m`: stop after this many calls.
    public var maxCalls: Int?
    /// `-r`: calls per rate period (default 10).
    public var rate: Double = 10
    /// `-rp`: the rate period in ms (default 1000).
    public var ratePeriod: Double = 1000
    /// `-l`: at most this many calls at once.
    public var limit: Int?
    /// `-d`: the duration of a `<pause/>` without `milliseconds`, in ms (default 0).
    public var defaultPause = 0
    /// `-inf FILE`: the injection file.
    public var injectionFile: String?
    /// `-key NAME VALUE`: keywords substituted as `[NAME]`.
    public var keys: [String: String] = [:]
    /// `-set NAME VALUE`: variables every call starts with (`[$NAME]`).
    public var globals: [String: String] = [:]
    /// `-timeout`: the global time limit, in seconds.
    public var timeout: Double?
    /// `-timeout_error`: reaching the global time limit is a failure.
    public var timeoutIsError = false
    /// `-recv_timeout`: the wait of a `<recv>` without `timeout`, in ms.
    public var recvTimeout: Int?
    /// `-max_retrans`: UDP retransmissions before a call fails (default: 5 for INVITE, 7 otherwise).
    public var maxRetransmissions: Int?
    /// `-trace_err`: write `<scenario>_<pid>_errors.log`.
    public var traceErrors = false
    /// `-trace_msg`: write `<scenario>_<pid>_messages.log`.
    public var traceMessages = false
    /// `-trace_logs`: write `<scenario>_<pid>_logs.log` (the `<log>` actions).
    public var traceLogs = false
    /// `-mi`: `[media_ip]` (default: the local IP).
    public var mediaIP: String?
    /// `-mp`: `[media_port]` (default 6000; no media socket is opened).
    public var mediaPort: UInt16 = 6000
    /// `-buff_size`: the socket buffer sizes.
    public var bufferSize = 4 << 20
    /// `-base_cseq`: the first `[cseq]` (default 1).
    public var baseCSeq = 1
    /// `-t`: the transport mode (default `u1`).
    public var transport: SIPpTransportMode = .udpOne
    /// `-tls_cert`: the certificate (PEM file) a TLS listener presents; without it (and
    /// `-tls_key`), a self-signed pair is generated for the run.
    public var tlsCertificate: String?
    /// `-tls_key`: the private key (PEM file) of `-tls_cert`.
    public var tlsKey: String?
    /// `-max_socket`: at most this many connections (TCP, TLS) open at once (default 65,536).
    public var maxSockets = 65_536
    /// The seed of the run's random choices (`chance`, distributions, RANDOM `-inf` lines),
    /// for repeatable runs (not a SIPp option; random when nil).
    public var seed: UInt64?
    /// Where trace files are written (not a SIPp option; SIPp writes them in the working
    /// directory, which `nil` keeps).
    public var traceDirectory: String?

    /// Creates options with SIPp's defaults.
    public init() {}

    /// Parses SIPp's arguments (without the program name).
    public static func parse(_ arguments: [String]) throws(SIPpUsageError) -> SIPpOptions {
        var o = SIPpOptions()
        var i = 0
        func value(_ name: String) throws(SIPpUsageError) -> String {
            i += 1
            guard i < arguments.count else { throw SIPpUsageError("option \(name) needs a value") }
            return arguments[i]
        }
        /// A number from 0 to 10^9 (every count, rate and duration here fits; bigger ones are
        /// refused rather than overflowing).
        func number(_ name: String) throws(SIPpUsageError) -> Double {
            let v = try value(name)
            guard let d = Double(v), d >= 0, d <= 1e9 else { throw SIPpUsageError("option \(name): \"\(v)\" is not a number from 0 to 10^9") }
            return d
        }
        func port(_ name: String) throws(SIPpUsageError) -> UInt16 {
            let v = try value(name)
            guard let p = UInt16(v) else { throw SIPpUsageError("option \(name): \"\(v)\" is not a port") }
            return p
        }
        while i < arguments.count {
            let a = arguments[i]
            switch a {
            case "-sf": o.scenario = .file(try value(a))
            case "-sn":
                let n = try value(a)
                guard SIPpBuiltIn.names.contains(n) else {
                    throw SIPpUsageError("built-in scenario \"\(n)\" is not supported (supported: \(SIPpBuiltIn.names.sorted().joined(separator: ", ")))")
                }
                o.scenario = .builtIn(n)
            case "-i": o.localIP = try value(a)
            case "-p": o.localPort = try port(a)
            case "-s": o.service = try value(a)
            case "-m":
                let n = try number(a)
                guard n >= 1, n == n.rounded() else { throw SIPpUsageError("option -m needs a whole number ≥ 1") }
                o.maxCalls = Int(n)
            case "-r":
                o.rate = try number(a)
                guard o.rate <= 1e6 else { throw SIPpUsageError("option -r: at most 10^6 calls per period") }
            case "-rp":
                var v = try value(a)
                var scale = 1.0
                if v.hasSuffix("ms") { v.removeLast(2) } else if v.hasSuffix("s") { v.removeLast(); scale = 1000 }
                guard let d = Double(v), d > 0, d <= 1e9 else { throw SIPpUsageError("option -rp: \"\(v)\" is not a period") }
                o.ratePeriod = d * scale
            case "-l":
                let n = try number(a)
                guard n >= 1 else { throw SIPpUsageError("option -l needs a number ≥ 1") }
                o.limit = Int(n)
            case "-d": o.defaultPause = Int(try number(a))
            case "-inf": o.injectionFile = try value(a)
            case "-key":
                let k = try value(a)
                o.keys[k] = try value(a)
            case "-set":
                let k = try value(a)
                o.globals[k] = try value(a)
            case "-timeout":
                var v = try value(a)
                var scale = 1.0
                if v.hasSuffix("ms") { v.removeLast(2); scale = 0.001 } else if v.hasSuffix("s") { v.removeLast() }
                guard let d = Double(v), d > 0, d <= 1e7 else { throw SIPpUsageError("option -timeout: \"\(v)\" is not a duration (up to 10^7 s)") }
                o.timeout = d * scale
            case "-timeout_error": o.timeoutIsError = true
            case "-recv_timeout": o.recvTimeout = Int(try number(a))
            case "-max_retrans":
                let n = try number(a)
                guard n <= 100 else { throw SIPpUsageError("option -max_retrans: at most 100") }
                o.maxRetransmissions = Int(n)
            case "-trace_err": o.traceErrors = true
            case "-trace_msg": o.traceMessages = true
            case "-trace_logs": o.traceLogs = true
            case "-nostdin": break   // this runner never reads standard input
            case "-bg": break        // accepted: runs in the foreground (no fork), same exit code
            case "-mi": o.mediaIP = try value(a)
            case "-mp": o.mediaPort = try port(a)
            case "-buff_size":
                let n = try number(a)
                guard n >= 1024, n <= Double(1 << 30) else { throw SIPpUsageError("option -buff_size needs 1024…2^30") }
                o.bufferSize = Int(n)
            case "-base_cseq": o.baseCSeq = Int(try number(a))
            case "-max_invite_retrans", "-max_non_invite_retrans":
                throw SIPpUsageError("option \(a) is not supported (use -max_retrans)")
            case "-t":
                let t = try value(a)
                guard let mode = SIPpTransportMode(rawValue: t) else {
                    throw SIPpUsageError("transport -t \(t) is not supported: u1, un, t1, tn, l1 or ln (ui, s1 and sn are not)")
                }
                o.transport = mode
            case "-tls_cert": o.tlsCertificate = try value(a)
            case "-max_socket":
                let n = try number(a)
                guard n >= 1, n <= 1_000_000 else { throw SIPpUsageError("option -max_socket needs 1…10^6") }
                o.maxSockets = Int(n)
            case "-tls_key": o.tlsKey = try value(a)
            default:
                if a.hasPrefix("-") { throw SIPpUsageError("option \(a) is not supported") }
                guard o.remote == nil else { throw SIPpUsageError("a second remote host \"\(a)\"") }
                do { o.remote = try SocketAddress(a, defaultPort: 5060) } catch {
                    throw SIPpUsageError("remote host \"\(a)\": \(error) (an IP address and port are expected)")
                }
            }
            i += 1
        }
        return o
    }
}

/// SIPp's `-t` transport modes this runner has.
public enum SIPpTransportMode: String, Sendable, Hashable {
    /// `u1`: one UDP socket for every call.
    case udpOne = "u1"
    /// `un`: a UDP socket per call (a caller's; a callee answers on its one socket).
    case udpPerCall = "un"
    /// `t1`: one TCP connection for every call.
    case tcpOne = "t1"
    /// `tn`: a TCP connection per call (a caller's; a callee answers on each call's own).
    case tcpPerCall = "tn"
    /// `l1`: one TLS connection for every call.
    case tlsOne = "l1"
    /// `ln`: a TLS connection per call.
    case tlsPerCall = "ln"

    /// What `[transport]` says: `UDP`, `TCP` or `TLS`.
    public var keyword: String {
        switch self {
        case .udpOne, .udpPerCall: return "UDP"
        case .tcpOne, .tcpPerCall: return "TCP"
        case .tlsOne, .tlsPerCall: return "TLS"
        }
    }
    /// Whether messages go over a stream (no retransmissions, as SIPp).
    public var isReliable: Bool { self != .udpOne && self != .udpPerCall }
    /// Whether each call of a caller gets its own socket or connection.
    public var perCall: Bool { self == .udpPerCall || self == .tcpPerCall || self == .tlsPerCall }
}

/// A command line the runner refuses (SIPp exits 255 on these too).
public struct SIPpUsageError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What is wrong.
    public var message: String
    /// Creates an error.
    public init(_ message: String) { self.message = message }
    /// The message.
    public var description: String { message }
}
