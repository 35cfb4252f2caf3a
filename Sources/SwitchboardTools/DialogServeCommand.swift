import Synchronization
import SIPMessage
import SIPRuntime
import SIPTransaction
import SIPTransport
import SIPDialog
import SDP
import CHeapStats
import SIPLoad
import Logging
import NetworkIO

/// `switchboard serve --dialogs`: a full UAS on the dialog layer (``DialogServer``): every
/// INVITE becomes an INVITE session, gets 180 and a 200 whose SDP answer the offer/answer
/// engine makes (PCMU, PCMA, telephone-event), waits for the ACK and ends with the BYE.
public final class DialogServeCommand: Sendable {
    public let server: DialogServer

    public init(listen: [SIPEndpoint.ListenPoint], ringing: Bool = true, tls: TLSConfiguration = .init(), logger: Logger = .disabled) throws {
        let host = listen.first?.address.ipString ?? "127.0.0.1"
        let capabilities = MediaCapabilities(address: host, streams: [
            StreamCapabilities(mediaType: .audio, port: 40_000, codecs: [.pcmu, .pcma, .telephoneEvent], ptime: 20),
        ])
        // The same offer (a load generator's) is answered from a template, only the o= id new.
        let answers = AnswerTemplateCache { offer, id in DialogServeCommand.answer(offer, capabilities: capabilities, sessionID: id) }
        server = try DialogServer(configuration: .init(listen: listen, tls: tls, logger: logger), ringing: ringing, userAgent: "Switchboard") { offer in
            answers.answer(offer)
        }
    }

    /// The answer to `offer` from a fresh offer/answer engine (our offer when there is none);
    /// `nil` when the offer cannot be answered (the call gets 488).
    static func answer(_ offer: SessionBody?, capabilities: MediaCapabilities,
                       sessionID: UInt64 = UInt64.random(in: 1...UInt64(Int64.max))) -> SessionBody? {
        var engine = OfferAnswer(capabilities: capabilities, sessionID: sessionID)
        do {
            guard let o = offer else { return .sdp(try engine.makeOffer().serialized()) }
            guard o.isSDP else { return nil }
            return .sdp(try engine.receiveOffer(bytes: o.bytes).sdp.serialized())
        } catch {
            return nil
        }
    }

    public struct Snapshot: Sendable {
        var server: DialogServer.Statistics
        var endpoint: EndpointStatistics
    }

    public func snapshot() -> Snapshot { Snapshot(server: server.statistics, endpoint: server.endpoint.statistics) }

    public func line(since previous: Snapshot, seconds: Double, elapsed: Int) -> String {
        let now = snapshot()
        let calls = Double(now.server.invites - previous.server.invites) / seconds
        let errors = (now.endpoint.sendErrors - previous.endpoint.sendErrors) + (now.endpoint.malformed - previous.endpoint.malformed)
            + (now.server.ackTimeouts - previous.server.ackTimeouts) + (now.endpoint.timeouts - previous.endpoint.timeouts)
        return "t=\(elapsed)s calls/s=\(Int(calls.rounded())) calls=\(now.server.invites) confirmed=\(now.server.confirmed) errors=\(errors) live-dialogs=\(now.server.liveDialogs) peak-live-dialogs=\(now.server.peakLiveDialogs) live-transactions=\(now.endpoint.liveTransactions) heap-bytes=\(hs_heap_in_use())"
    }

    public func summary() -> String {
        let s = server.statistics, e = server.endpoint.statistics
        return "total: invites=\(s.invites) answered=\(s.answered) confirmed=\(s.confirmed) remote-hangups=\(s.remoteHangups) cancelled=\(s.cancelled) refused=\(s.refused) ack-timeouts=\(s.ackTimeouts) other-ends=\(s.otherEnds) other-requests=\(s.otherRequests) peak-live-dialogs=\(s.peakLiveDialogs) requests=\(e.requestsReceived) sent=\(e.messagesSent) malformed=\(e.malformed) send-errors=\(e.sendErrors)"
    }
}
