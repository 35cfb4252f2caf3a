import Synchronization
import CoreMetrics
import Media
import MediaRuntime
import SIPRuntime
import SIPDialog

/// What a ``Phone`` reports through swift-metrics: its calls, its registration, its SIP
/// endpoint's transactions and retransmissions, and its calls' media loss and jitter.
///
/// The names (with ``Configuration/prefix`` before each, `switchboard_` by default):
///
/// | metric | kind | dimensions | what |
/// |---|---|---|---|
/// | `calls_total` | counter | `direction` | calls created (dialed or received) |
/// | `calls_ended_total` | counter | `direction`, `reason` | calls ended, by ``CallEndReason`` (`hung_up`, `busy`, `no_media`…) |
/// | `calls_active` | gauge | | calls not ended |
/// | `call_setup_seconds` | timer | `direction` | from the call's creation to established |
/// | `call_duration_seconds` | timer | `direction` | from established to ended |
/// | `registrations_total` | counter | `result` (`registered`, `failed`) | registration outcomes (refreshes included) |
/// | `registered` | gauge | | 1 while registered |
/// | `sip_requests_received_total`, `sip_responses_received_total`, `sip_messages_sent_total` | counter | | the endpoint's traffic |
/// | `sip_retransmissions_sent_total`, `sip_retransmissions_received_total` | counter | | retransmissions |
/// | `sip_transaction_timeouts_total`, `sip_malformed_total`, `sip_rejected_total`, `sip_send_errors_total` | counter | | failures |
/// | `sip_transactions_active` | gauge | | live transactions |
/// | `rtp_packets_received_total`, `rtp_packets_lost_total` | counter | | each call's media, added when it ends |
/// | `rtp_jitter_seconds` | recorder | | each call's interarrival jitter when it ends |
/// | `rtp_mos` | recorder | | each call's estimated MOS when it ends |
///
/// Call and media figures are reported as calls change; the endpoint's counters are read every
/// ``Configuration/interval`` (and when the phone closes) and reported as increments, so the
/// message path itself never touches a metrics backend.
public final class PhoneMetrics: Sendable {
    /// Where metrics go and how they are named.
    public struct Configuration: Sendable {
        /// The backend (`MetricsSystem.factory`, what the process bootstrapped, by default).
        public var factory: any MetricsFactory
        /// Put before every name.
        public var prefix: String
        /// Added to every metric (e.g. `[("phone", "reception")]` for several phones in one process).
        public var dimensions: [(String, String)]
        /// How often the endpoint's counters are read.
        public var interval: Duration

        public init(factory: any MetricsFactory = MetricsSystem.factory, prefix: String = "switchboard_",
                    dimensions: [(String, String)] = [], interval: Duration = .seconds(10)) {
            self.factory = factory
            self.prefix = prefix
            self.dimensions = dimensions
            self.interval = interval
        }
    }

    let configuration: Configuration
    private let active: Gauge
    private let registered: Gauge
    private let transactions: Gauge
    private let jitter: Recorder
    private let mos: Recorder
    private let rtpReceived: Counter
    private let rtpLost: Counter
    private let registrations: [Bool: Counter]
    /// The endpoint counters and the statistics they were last read at.
    private let endpointCounters: [(Counter, @Sendable (EndpointStatistics) -> Int)]
    private let lastEndpoint = Mutex(EndpointStatistics())
    private let liveCalls = Atomic<Int>(0)
    /// Per direction (outgoing, incoming): made once, so a call's figures allocate nothing.
    private let created: [Counter]
    private let setup: [CoreMetrics.Timer]
    private let duration: [CoreMetrics.Timer]
    /// Per direction and end reason, made on first use (the reasons are a fixed, small set).
    private let ended = Mutex<[EndKey: Counter]>([:])

    private struct EndKey: Hashable {
        var incoming: Bool
        var reason: String
    }

    init(_ configuration: Configuration) {
        self.configuration = configuration
        let f = configuration.factory, p = configuration.prefix, d = configuration.dimensions
        active = Gauge(label: p + "calls_active", dimensions: d, factory: f)
        registered = Gauge(label: p + "registered", dimensions: d, factory: f)
        transactions = Gauge(label: p + "sip_transactions_active", dimensions: d, factory: f)
        jitter = Recorder(label: p + "rtp_jitter_seconds", dimensions: d, aggregate: true, factory: f)
        mos = Recorder(label: p + "rtp_mos", dimensions: d, aggregate: true, factory: f)
        rtpReceived = Counter(label: p + "rtp_packets_received_total", dimensions: d, factory: f)
        rtpLost = Counter(label: p + "rtp_packets_lost_total", dimensions: d, factory: f)
        registrations = [
            true: Counter(label: p + "registrations_total", dimensions: d + [("result", "registered")], factory: f),
            false: Counter(label: p + "registrations_total", dimensions: d + [("result", "failed")], factory: f),
        ]
        let fields: [(String, @Sendable (EndpointStatistics) -> Int)] = [
            ("sip_requests_received_total", { $0.requestsReceived }), ("sip_responses_received_total", { $0.responsesReceived }),
            ("sip_messages_sent_total", { $0.messagesSent }), ("sip_retransmissions_sent_total", { $0.retransmissionsSent }),
            ("sip_retransmissions_received_total", { $0.retransmissionsReceived }), ("sip_transaction_timeouts_total", { $0.timeouts }),
            ("sip_malformed_total", { $0.malformed }), ("sip_rejected_total", { $0.rejected }), ("sip_send_errors_total", { $0.sendErrors }),
        ]
        endpointCounters = fields.map { (Counter(label: p + $0.0, dimensions: d, factory: f), $0.1) }
        let directions = [CallDirection.outgoing, .incoming].map { d + [("direction", $0.metricLabel)] }
        created = directions.map { Counter(label: p + "calls_total", dimensions: $0, factory: f) }
        setup = directions.map { CoreMetrics.Timer(label: p + "call_setup_seconds", dimensions: $0, preferredDisplayUnit: .seconds, factory: f) }
        duration = directions.map { CoreMetrics.Timer(label: p + "call_duration_seconds", dimensions: $0, preferredDisplayUnit: .seconds, factory: f) }
        active.record(0)
        registered.record(0)
    }

    // MARK: Fed by the phone and its calls

    func callCreated(_ direction: CallDirection) {
        created[direction.metricIndex].increment()
        active.record(liveCalls.add(1, ordering: .relaxed).newValue)
    }

    func callEstablished(_ direction: CallDirection, after setup: Duration) {
        self.setup[direction.metricIndex].recordNanoseconds(setup.nanoseconds)
    }

    func callEnded(_ direction: CallDirection, _ reason: CallEndReason, established: Duration?) {
        let key = EndKey(incoming: direction == .incoming, reason: reason.metricLabel)
        let counter = ended.withLock { all in
            if let c = all[key] { return c }
            let c = Counter(label: configuration.prefix + "calls_ended_total",
                            dimensions: configuration.dimensions + [("direction", direction.metricLabel), ("reason", key.reason)],
                            factory: configuration.factory)
            all[key] = c
            return c
        }
        counter.increment()
        if let established { duration[direction.metricIndex].recordNanoseconds(established.nanoseconds) }
        active.record(max(0, liveCalls.subtract(1, ordering: .relaxed).newValue))
    }

    func media(_ stats: MediaSessionStatistics) {
        guard stats.call.codec != "none" else { return }
        rtpReceived.increment(by: Int64(clamping: stats.call.received.packets))
        rtpLost.increment(by: max(0, stats.call.packetsLost))
        jitter.record(Double(stats.call.jitter.nanoseconds) / 1e9)
        if let m = stats.call.mos { mos.record(m) }
    }

    func registration(_ state: RegistrationClient.State) {
        switch state {
        case .registered:
            registrations[true]!.increment()
            registered.record(1)
        case .failed:
            registrations[false]!.increment()
            registered.record(0)
        case .unregistered:
            registered.record(0)
        default:
            break
        }
    }

    /// Reports what the endpoint counted since the last read.
    func sample(_ now: EndpointStatistics) {
        let before = lastEndpoint.withLock { last -> EndpointStatistics in
            defer { last = now }
            return last
        }
        for (counter, field) in endpointCounters {
            let delta = field(now) - field(before)
            if delta > 0 { counter.increment(by: Int64(delta)) }
        }
        transactions.record(now.liveTransactions)
    }
}

extension Duration {
    var nanoseconds: Int64 {
        let c = components
        return c.seconds.multipliedReportingOverflow(by: 1_000_000_000).partialValue &+ c.attoseconds / 1_000_000_000
    }
}

extension CallDirection {
    var metricLabel: String { self == .incoming ? "incoming" : "outgoing" }
    var metricIndex: Int { self == .incoming ? 1 : 0 }
}

extension CallEndReason {
    /// A metric dimension value: the reason without its details (statuses, targets).
    public var metricLabel: String {
        switch self {
        case .hungUp(let by): return by == .local ? "hung_up_local" : "hung_up_remote"
        case .cancelled: return "cancelled"
        case .rejected: return "rejected"
        case .busy: return "busy"
        case .timeout: return "timeout"
        case .mediaFailure: return "media_failure"
        case .forwarded: return "forwarded"
        case .redirected: return "redirected"
        case .transferred: return "transferred"
        case .replaced: return "replaced"
        case .noMedia: return "no_media"
        case .networkChange: return "network_change"
        case .failed: return "failed"
        }
    }
}
