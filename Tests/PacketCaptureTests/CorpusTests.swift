import Testing
import PacketCapture
import SIPMessage
import SwitchboardTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The captures in `../shared/corpora/pcaps` or `$SWITCHBOARD_CORPORA/pcaps` (see its README), read in place.
@Suite struct CorpusTests {
    /// Per file: SIP messages, frames. Counted by this decoder; the messages agree with tshark's
    /// dissection of the same files (`TsharkCrossCheckTests`).
    static let expected: [(path: String, messages: Int, frames: Int)] = [
        ("sip-capture/sip-tcp.pcap", 30, 30),
        ("sip-capture/sip-i.pcap", 2, 3),
        ("sip-capture/sip-frag.pcap", 0, 1),
        ("sip-capture/to-tag.pcap", 1, 1),
        ("sip-capture/no-to-tag.pcap", 1, 1),
        ("wireshark-samplecaptures/DTMFsipinfo.pcap", 32, 32),
        ("wireshark-samplecaptures/MagicJack-_short_call.pcap", 11, 1381),
        ("wireshark-samplecaptures/SIP_CALL_RTP_G711", 14, 4269),
        ("wireshark-samplecaptures/SIP_DTMF2.cap", 29, 1360),
        ("wireshark-samplecaptures/metasploit-sip-invite-spoof.pcap", 2, 3),
        ("wireshark-samplecaptures/rtp-opus-only.pcap", 0, 425),
        ("wireshark-samplecaptures/sip-rtp-g711.pcap", 10, 852),
        ("wireshark-samplecaptures/sip-rtp-g722.pcap", 6, 433),
        ("wireshark-samplecaptures/sip-rtp-opus-hybrid.pcap", 2, 7),
        ("asterisk-testsuite/16_bit_48khz_60_fec_rtp.pcapng", 0, 3000),
        ("asterisk-testsuite/dtmf_2833_4.pcap", 0, 10),
        ("asterisk-testsuite/opus-2013785496.pcap", 0, 765),
    ]

    /// Fails under CI, skips with a message elsewhere, when the corpus is missing.
    static func corpusPresent(sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
        TestPaths.requirement("the PacketCapture corpus at \(Corpus.root)", available: Corpus.available, sourceLocation: sourceLocation)
    }

    @Test(arguments: expected.map(\.path))
    func messageCounts(path: String) throws {
        guard Self.corpusPresent() else { return }
        let e = try #require(Self.expected.first { $0.path == path })
        let s = try CaptureSummary(path: Corpus.root + "/" + path)
        #expect(s.fileError == nil, "\(path): \(String(describing: s.fileError))")
        #expect(s.counters.frames == e.frames, "\(path)")
        #expect(s.messages.count == e.messages, "\(path)")
        #expect(s.counters.sipMessages == e.messages)
        #expect(s.counters.parseErrors == 0, "\(path): \(s.anomalies)")
    }

    @Test func tcpCaptureFramesThirtyMessagesInFiveCalls() throws {
        guard Self.corpusPresent() else { return }
        let s = try CaptureSummary(path: Corpus.root + "/sip-capture/sip-tcp.pcap")
        #expect(s.messages.count == 30)
        #expect(s.messages.allSatisfy { $0.transport == .tcp })
        #expect(Set(s.messages.compactMap(\.message.callID)).count == 5)
        #expect(s.counters.tcpGaps == 0)
        #expect(s.anomalies.isEmpty, "\(s.anomalies)")
        // Capture order is kept.
        #expect(zip(s.messages, s.messages.dropFirst()).allSatisfy { $0.timestamp <= $1.timestamp })
    }

    @Test func timestampsAndEndpoints() throws {
        guard Self.corpusPresent() else { return }
        let s = try CaptureSummary(path: Corpus.root + "/sip-capture/to-tag.pcap")
        let m = try #require(s.messages.first)
        // Record header: seconds 0x5b6a5437, microseconds 0x0a8c3a.
        #expect(m.timestamp == CaptureTimestamp(seconds: 1_533_695_031, nanoseconds: 691_258_000))
        #expect(m.transport == .udp && m.frameNumber == 1)
    }

    @Test func fragmentedSIPReassembles() throws {
        guard Self.corpusPresent() else { return }
        // sip-i.pcap: a SIP-I INVITE (ISUP body) in two IPv4 fragments, then one more message.
        let s = try CaptureSummary(path: Corpus.root + "/sip-capture/sip-i.pcap")
        #expect(s.counters.fragments == 2)
        #expect(s.counters.datagramsReassembled == 1)
        #expect(s.messages.first?.message.method == .invite)
        #expect(s.messages.first?.frameNumber == 2)
        // sip-frag.pcap holds only the last fragment of a datagram: nothing to reassemble, and
        // the pending fragment is reported at the end of the capture.
        let lone = try CaptureSummary(path: Corpus.root + "/sip-capture/sip-frag.pcap")
        #expect(lone.counters.fragments == 1 && lone.counters.datagramsReassembled == 0)
        guard case .fragmentTimeout(count: 1) = lone.anomalies.first?.kind else { Issue.record("\(lone.anomalies)"); return }
    }

    @Test func netMonFileIsRefused() throws {
        guard Self.corpusPresent() else { return }
        do throws(CaptureFileError) {
            _ = try CaptureFileReader(path: Corpus.root + "/wireshark-samplecaptures/c07-sip-r2.cap")
            Issue.record("a NetMon file was accepted")
        } catch {
            #expect(error.rule == .netMonFormat)
            #expect(error.description.contains("GMBU"))
        }
    }

    @Test func pcapngParses() throws {
        guard Self.corpusPresent() else { return }
        let r = try CaptureFileReader(path: Corpus.root + "/asterisk-testsuite/16_bit_48khz_60_fec_rtp.pcapng")
        #expect(r.format == .pcapng)
        let (frames, error) = readAll(r)
        #expect(error == nil)
        #expect(frames.count == 3000)
        #expect(zip(frames, frames.dropFirst()).allSatisfy { $0.timestamp <= $1.timestamp })
    }
}
