import SIPMessage
import SIPTransaction

/// A SIP element on the simulated network: the real ``TransactionLayer`` driven by the
/// simulation's clock and network, with the transaction user's behaviour given as closures.
public final class SimulatedNode {
    public let name: String
    public private(set) var layer: TransactionLayer<String>
    unowned let simulation: Simulation
    private var timerGenerations: [TimerKey: UInt64] = [:]
    private var generation: UInt64 = 0

    struct TimerKey: Hashable { var id: TransactionID; var timer: TransactionTimer }

    /// What reached the transaction user, in order.
    public enum Event: Sendable {
        case request(SIPMessage, from: String, transaction: TransactionID)
        case cancel(SIPMessage, transaction: TransactionID, invite: TransactionID)
        case ack(SIPMessage)
        case response(SIPMessage, transaction: TransactionID, at: Duration)
        case strayResponse(SIPMessage)
        case timeout(TransactionID, TransactionTimer, at: Duration)
        case transportError(TransactionID)
        case terminated(TransactionID, at: Duration)
        case malformed(SIPParseError)
    }

    public private(set) var events: [Event] = []
    /// The TU's reaction to each event (answer requests, send ACKs, …).
    public var onEvent: ((SimulatedNode, Event) -> Void)?
    /// Datagrams this node sent.
    public private(set) var transmissions = 0

    init(name: String, simulation: Simulation, layer: TransactionLayer<String>) {
        self.name = name
        self.simulation = simulation
        self.layer = layer
    }

    /// Starts a client transaction (UDP semantics: unreliable).
    @discardableResult
    public func sendRequest(_ request: SIPMessage, to: String) -> TransactionID {
        let (id, out) = layer.sendRequest(request, to: to, reliable: false)
        apply(out)
        return id
    }

    /// Answers in a server transaction.
    public func respond(_ response: SIPMessage, in id: TransactionID) {
        apply(layer.respond(response, in: id))
    }

    func receive(_ bytes: [UInt8], from: String) {
        do {
            let m = try SIPMessage(bytes: bytes)
            apply(layer.receive(m, from: from, reliable: false))
        } catch {
            emit(.malformed(error))
        }
    }

    private func emit(_ e: Event) {
        events.append(e)
        onEvent?(self, e)
    }

    private func apply(_ outputs: [TransactionLayer<String>.Output]) {
        for o in outputs {
            switch o {
            case .send(let m, let to, _):
                transmissions += 1
                simulation.transmit(m, from: name, to: to)
            case .startTimer(let id, let t, let d):
                generation += 1
                let key = TimerKey(id: id, timer: t)
                let g = generation
                timerGenerations[key] = g
                simulation.schedule(after: d) { [weak self] in
                    guard let self, self.timerGenerations[key] == g else { return }
                    self.timerGenerations[key] = nil
                    self.apply(self.layer.timerFired(id, t))
                }
            case .cancelTimer(let id, let t):
                timerGenerations[TimerKey(id: id, timer: t)] = nil
            case .request(let m, let from, let id): emit(.request(m, from: from, transaction: id))
            case .cancel(let m, _, let id, let invite): emit(.cancel(m, transaction: id, invite: invite))
            case .ack(let m, _): emit(.ack(m))
            case .response(let m, let id): emit(.response(m, transaction: id, at: simulation.now))
            case .strayResponse(let m, _): emit(.strayResponse(m))
            case .timeout(let id, let t): emit(.timeout(id, t, at: simulation.now))
            case .transportError(let id): emit(.transportError(id))
            case .terminated(let id):
                for k in timerGenerations.keys where k.id == id { timerGenerations[k] = nil }
                emit(.terminated(id, at: simulation.now))
            }
        }
    }
}
