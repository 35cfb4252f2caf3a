import Foundation
import Synchronization
import SwitchboardTestSupport
import Testing
import Media
import MediaRuntime
import SIPMessage
import SIPAuth
import SIPDialog
import SIPProxy
import SIPRuntime
import SIPTransport
@testable import SwitchboardTools
@testable import Switchboard
import NetworkIO

/// linphonec 5.1 (Debian linphone-cli, installed by scripts/test), started by
/// scripts/peers/linphone-start on 127.0.0.1 and scripted through its command FIFO. Skipped
/// with a message without linphonec, except under CI, where that fails.
enum Linphone {
    static let path = "/usr/bin/linphonec"
    static var available: Bool { FileManager.default.isExecutableFile(atPath: path) }

    struct Instance {
        var pid: Int32
        var sipPort: UInt16
        var rundir: String
        /// How it names itself (its From); it answers any user at its port.
        var aor: String { "sip:lin@127.0.0.1" }
    }

    static func start(autoAnswer: Bool = true) async throws -> Instance {
        let sip = try PeerPorts.free()
        let rundir = NSTemporaryDirectory() + "sb-linphone-\(UUID().uuidString)"
        try await Baresip.run(TestPaths.repoRoot + "/scripts/peers/linphone-start", [String(sip), rundir, autoAnswer ? "auto" : "manual"],
                              timeout: .seconds(30))
        let text = (try? String(contentsOfFile: rundir + "/pid", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        guard let pid = Int32(text) else { throw ToolError("linphonec did not start: \(log(rundir))") }
        let l = Instance(pid: pid, sipPort: sip, rundir: rundir)
        // No sound card here: with files, `play` sends a WAV file's audio in the current call.
        try send(l, "soundcard use files")
        return l
    }

    static func stop(_ l: Instance) {
        let group = getpgid(l.pid)
        if group > 1 && group != getpgrp() { killpg(group, SIGKILL) } else { kill(l.pid, SIGKILL) }
        try? FileManager.default.removeItem(atPath: l.rundir)
    }

    static func log(_ rundir: String) -> String { (try? String(contentsOfFile: rundir + "/log", encoding: .utf8)) ?? "" }

    /// What linphonec printed, without its complaints about the missing sound card and video.
    static func events(_ l: Instance) -> String {
        log(l.rundir).split(separator: "\n").filter { !$0.contains("-error-") && !$0.contains("video") }.joined(separator: "\n")
    }

    /// Writes one command line to linphonec's FIFO. Commands are the few forms the tests use,
    /// checked here: linphonec crashed once on a malformed command.
    static func send(_ l: Instance, _ command: String) throws {
        let allowed = ["call sip:", "transfer ", "pause ", "answer ", "play /", "soundcard use files", "terminate "]
        guard !command.contains("\n"), allowed.contains(where: { command.hasPrefix($0) }) else { throw ToolError("not a command for linphonec: \(command)") }
        let fd = open(l.rundir + "/cmd", O_WRONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw ToolError("linphonec's FIFO: errno \(errno)") }
        defer { close(fd) }
        let bytes = Array((command + "\n").utf8)
        guard write(fd, bytes, bytes.count) == bytes.count else { throw ToolError("linphonec's FIFO: short write") }
    }

    /// Waits (bounded, polling its log) until linphonec has printed `text`.
    static func waitFor(_ l: Instance, _ text: String, timeout: Duration = .seconds(10)) async -> Bool {
        await waitFor(l, timeout: timeout) { $0.contains(text) }
    }

    /// Waits (bounded, polling its log) until linphonec has printed a line that `matches`.
    static func waitFor(_ l: Instance, timeout: Duration = .seconds(10), line matches: (Substring) -> Bool) async -> Bool {
        let clock = ContinuousClock(), deadline = clock.now + timeout
        while clock.now < deadline {
            if log(l.rundir).split(separator: "\n").contains(where: matches) { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return log(l.rundir).split(separator: "\n").contains(where: matches)
    }
}

/// Transfer with linphonec 5.1 in every role: transferor of a blind and of an attended
/// transfer (REFER with Replaces) with our phones as transferee and target, transferee of our
/// blind and attended transfers, and target of our attended transfer. Our phones have media (a
/// tone each) and linphonec plays a file on command, so the new calls are checked for audio,
/// not only for their state.
///
/// linphonec's attended transfer refers to the consultation dialog's remote *address of record*
/// (the From of a call it answered, the To of one it placed), never to its Contact, and the To
/// it writes drops the Request-URI's port. So Refer-To names a port only when the target called
/// linphonec from an address of record that carries one; otherwise the transferee's INVITE
/// goes to port 5060, which only a proxy in front of the target's registration serves. Its 180
/// Ringing has no Contact, and its final NOTIFY says `terminated;reason=reason=noresource`.
@Suite("Transfer with linphonec", .enabled(if: Linphone.available || TestPaths.isCI, "linphonec is not installed: linphone interop skipped"),
       .requires("linphonec (Debian linphone-cli)", { Linphone.available }))
struct LinphoneTransferTests {
    typealias Lines = ReportLines

    /// A phone on 127.0.0.1 with media (a tone); `port` 0 takes any, `aorWithPort` puts the
    /// port in its address of record (its From), `proxy` is its outbound proxy.
    static func phone(_ name: String, _ lines: Lines, port: UInt16 = 0, aorWithPort: Bool = false, tone: Double = 440,
                      proxy: SIPURI? = nil, password: String? = nil) throws -> Phone {
        let identity = try SIPURI("sip:\(name)@127.0.0.1" + (aorWithPort ? ":\(port)" : ""))
        let config = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: port))]),
                                                identity: identity,
                                                credentials: password.map { DigestClient(username: name, password: $0) }, outboundProxy: proxy,
                                                sessionTimer: nil)
        let media = PhoneMediaOptions(configuration: MediaSessionConfiguration(localAddress: "127.0.0.1", portRange: 10000...19999, rtcpInterval: .seconds(1)),
                                      input: .tone(frequency: tone))
        return try Phone(name: name, configuration: config, autoAnswer: .milliseconds(100), media: media, report: { lines.append($0) },
                         trace: { m, outgoing, _ in
                             lines.append("\(name) \(outgoing ? "sent" : "got") \(LadderPrinter.label(m))")
                             // The NOTIFYs of a transfer: their sipfrag and subscription state.
                             if m.method == .notify {
                                 let frag = String(decoding: m.body, as: UTF8.self).split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
                                 let state = m.values(.subscriptionState).first ?? ""
                                 lines.append("\(name) \(outgoing ? "sent" : "got") sipfrag \(frag) [\(state)]")
                             }
                         })
    }

    static func uri(_ p: Phone, _ user: String) throws -> SIPURI {
        try SIPURI("sip:\(user)@127.0.0.1:\(p.agent.endpoint.localAddresses[0].address.port)")
    }

    /// Waits until the call has received more than `packets` RTP packets.
    static func hears(_ p: Phone, _ key: SessionKey, packets: Int = 25) async -> Bool {
        await p.wait(timeout: .seconds(10)) { (p.mediaStatistics(key)?.call.received.packets ?? 0) > packets }
    }

    /// Every call a phone took part in, in no order.
    static func calls(_ p: Phone) -> [SessionKey] { p.callStates.withLock { Array($0.keys) } }

    /// Has linphonec play 5 s of 1 kHz (at 16 kHz) into its current call, once that call's
    /// streams run, and waits until `p` receives it: linphonec sends next to nothing without a
    /// sound card, so packets mean its audio.
    static func hears(linphoneCaller p: Phone, _ key: SessionKey, _ l: Linphone.Instance) async -> Bool {
        let wav = l.rundir + "/tone.wav"
        let samples = (0..<80_000).map { Int16(8000 * sin(2 * Double.pi * 1000 * Double($0) / 16000)) }
        guard (try? WAVFile(sampleRate: 16000, samples: .pcm16(samples)).write(path: wav)) != nil,
              // It names the call by the Refer-To it followed, `<sip:carol@…?Replaces=…>`, if any.
              await Linphone.waitFor(l, line: { $0.hasPrefix("Media streams established with ") && $0.contains("sip:\(p.name)@") }),
              (try? Linphone.send(l, "play \(wav)")) != nil else { return false }
        return await hears(p, key, packets: 50)
    }

    static func context(_ lines: Lines, _ l: Linphone.Instance) -> String {
        "\(lines.all.joined(separator: "\n"))\n--- linphonec:\n\(Linphone.events(l))"
    }

    /// The sipfrags of the NOTIFYs `name` sent, in order.
    static func notifies(_ lines: Lines, sentBy name: String) -> [String] {
        lines.all.filter { $0.hasPrefix("\(name) sent sipfrag ") }.map { String($0.dropFirst("\(name) sent sipfrag ".count)) }
    }

    /// Waits until bob has sent the final NOTIFY of his transfer (200 OK, ending the
    /// subscription) and linphonec has taken every one (200); checks that 100 Trying came first.
    static func notified(_ bob: Phone, _ lines: Lines) async -> Bool {
        let done = await bob.wait(timeout: .seconds(10)) {
            let frags = notifies(lines, sentBy: "bob")
            return frags.last == "SIP/2.0 200 OK [terminated;reason=noresource]" && lines.count("bob: NOTIFY → 200") == frags.count
        }
        let frags = notifies(lines, sentBy: "bob")
        #expect(frags.first == "SIP/2.0 100 Trying [active;expires=180]", "\(frags)")
        return done
    }

    /// linphonec calls bob; returns bob's key of that call once it is up on both sides.
    static func linphoneCalls(_ bob: Phone, _ l: Linphone.Instance, _ lines: Lines) async throws -> SessionKey {
        try Linphone.send(l, "call \(try uri(bob, "bob"))")
        try #require(await bob.wait(timeout: .seconds(10)) { !bob.incomingCalls.isEmpty }, "\(context(lines, l))")
        let key = bob.incomingCalls[0]
        try #require(await bob.wait(key, timeout: .seconds(10)) { $0 == .confirmed }, "\(context(lines, l))")
        try #require(await Linphone.waitFor(l, "Media streams established with sip:bob@"), "\(context(lines, l))")
        return key
    }

    @Test("linphonec transfers us blind: bob calls carol with its Referred-By, NOTIFYs 100 then a terminating 200, linphonec hangs up",
          .timeLimit(.minutes(1)))
    func linphoneBlindTransfersUs() async throws {
        let l = try await Linphone.start()
        defer { Linphone.stop(l) }
        let lines = Lines()
        let bob = try Self.phone("bob", lines, tone: 700), carol = try Self.phone("carol", lines, tone: 1100)
        defer { bob.close(); carol.close() }
        let lb = try await Self.linphoneCalls(bob, l, lines)
        let target = try Self.uri(carol, "carol")
        try Linphone.send(l, "transfer \(target)")

        #expect(await bob.wait(timeout: .seconds(10)) { lines.contains("bob: transfer to \(target) (Referred-By \(l.aor))") }, "\(Self.context(lines, l))")
        try #require(await carol.wait(timeout: .seconds(10)) { carol.incomingCalls.count == 1 }, "\(Self.context(lines, l))")
        let bc = carol.incomingCalls[0]
        #expect(await carol.wait(timeout: .seconds(10)) { lines.contains("carol: incoming call from sip:bob@127.0.0.1 (Referred-By \(l.aor))") },
                "\(Self.context(lines, l))")
        #expect(await carol.wait(bc, timeout: .seconds(10)) { $0 == .confirmed })
        // Our NOTIFYs: 100 Trying while the new call is set up (180 Ringing while carol rings),
        // then 200 OK ending the subscription; linphonec takes each and hangs up on bob.
        #expect(await Self.notified(bob, lines), "\(Self.context(lines, l))")
        #expect(await bob.wait(lb, timeout: .seconds(10)) { $0 == .terminated(.remoteHangup) }, "\(Self.context(lines, l))")
        // The new call carries audio both ways.
        let cb = try #require(Self.calls(bob).first { $0 != lb })
        #expect(await Self.hears(carol, bc), "\(Self.context(lines, l))")
        #expect(await Self.hears(bob, cb), "\(Self.context(lines, l))")
    }

    /// linphonec (with bob on hold as call 1) has a second call with carol (call 2) and refers
    /// bob to it with Replaces; bob's new INVITE must reach carol, who takes it in place of her
    /// call with linphonec, which then hangs up on bob; the new call carries audio both ways.
    func attended(_ l: Linphone.Instance, bob: Phone, carol: Phone, lb: SessionKey, consultation: SessionKey, referTo: String,
                  _ lines: Lines) async throws {
        try Linphone.send(l, "transfer 1 --to-call 2")
        #expect(await bob.wait(timeout: .seconds(10)) {
            lines.contains("bob: transfer to \(referTo) (Referred-By \(l.aor)) replacing \(consultation.callID)")
        }, "\(Self.context(lines, l))")
        try #require(await carol.wait(timeout: .seconds(10)) { carol.incomingCalls.contains { $0.callID != consultation.callID } },
                     "\(Self.context(lines, l))")
        let bc = try #require(carol.incomingCalls.first { $0.callID != consultation.callID })
        #expect(await carol.wait(timeout: .seconds(10)) { lines.contains("carol: call replaces \(consultation.callID) (Referred-By \(l.aor))") },
                "\(Self.context(lines, l))")
        #expect(await carol.wait(bc, timeout: .seconds(10)) { $0 == .confirmed }, "\(Self.context(lines, l))")
        // Carol ends the replaced call with linphonec herself (BYE).
        #expect(await carol.wait(consultation, timeout: .seconds(10)) { $0 == .terminated(.localHangup) }, "\(Self.context(lines, l))")
        #expect(await Self.notified(bob, lines), "\(Self.context(lines, l))")
        #expect(await bob.wait(lb, timeout: .seconds(10)) { $0 == .terminated(.remoteHangup) }, "\(Self.context(lines, l))")
        let cb = try #require(Self.calls(bob).first { $0 != lb })
        #expect(await Self.hears(carol, bc), "\(Self.context(lines, l))")
        #expect(await Self.hears(bob, cb), "\(Self.context(lines, l))")
    }

    @Test("linphonec's attended transfer, carol having called it: Refer-To is carol's address of record (with its port) and Replaces; carol takes bob's call in place of hers",
          .timeLimit(.minutes(1)))
    func linphoneAttendedTransferToItsCaller() async throws {
        let l = try await Linphone.start()
        defer { Linphone.stop(l) }
        let lines = Lines()
        let cport = try PeerPorts.free()
        let bob = try Self.phone("bob", lines, tone: 700), carol = try Self.phone("carol", lines, port: cport, aorWithPort: true, tone: 1100)
        defer { bob.close(); carol.close() }
        let lb = try await Self.linphoneCalls(bob, l, lines)
        try Linphone.send(l, "pause 1")
        try #require(await Linphone.waitFor(l, "Call 1 with \(try Self.uri(bob, "bob")) is now paused."), "\(Self.context(lines, l))")
        // Carol calls linphonec, which lets it ring while it has bob on hold: answered by command.
        let cl = await carol.call(try SIPURI("sip:lin@127.0.0.1:\(l.sipPort)"))
        try #require(await Linphone.waitFor(l, "Receiving new incoming call from sip:carol@127.0.0.1:\(cport), assigned id 2"), "\(Self.context(lines, l))")
        try Linphone.send(l, "answer 2")
        try #require(await carol.wait(cl, timeout: .seconds(10)) { $0 == .confirmed }, "\(Self.context(lines, l))")
        try #require(await Linphone.waitFor(l, "Media streams established with sip:carol@"), "\(Self.context(lines, l))")
        try await attended(l, bob: bob, carol: carol, lb: lb, consultation: cl, referTo: "sip:carol@127.0.0.1:\(cport)", lines)
    }

    @Test("linphonec's attended transfer to carol's call still ringing there: its 180 had no Contact, yet carol's early dialog is found, cancelled and replaced",
          .timeLimit(.minutes(1)))
    func linphoneAttendedTransferToARingingCall() async throws {
        let l = try await Linphone.start(autoAnswer: false)
        defer { Linphone.stop(l) }
        let lines = Lines()
        let cport = try PeerPorts.free()
        let bob = try Self.phone("bob", lines, tone: 700), carol = try Self.phone("carol", lines, port: cport, aorWithPort: true, tone: 1100)
        defer { bob.close(); carol.close() }
        let lb = try await Self.linphoneCalls(bob, l, lines)
        try Linphone.send(l, "pause 1")
        try #require(await Linphone.waitFor(l, "Call 1 with \(try Self.uri(bob, "bob")) is now paused."), "\(Self.context(lines, l))")
        let cl = await carol.call(try SIPURI("sip:lin@127.0.0.1:\(l.sipPort)"))
        try #require(await carol.wait(cl, timeout: .seconds(10)) { $0 == .proceeding(180) }, "\(Self.context(lines, l))")
        try #require(await Linphone.waitFor(l, "Receiving new incoming call from sip:carol@127.0.0.1:\(cport), assigned id 2"), "\(Self.context(lines, l))")
        try Linphone.send(l, "transfer 1 --to-call 2")
        #expect(await bob.wait(timeout: .seconds(10)) {
            lines.contains("bob: transfer to sip:carol@127.0.0.1:\(cport) (Referred-By \(l.aor)) replacing \(cl.callID)")
        }, "\(Self.context(lines, l))")
        // RFC 3891 §3: an early dialog the target placed is replaced, and ended with CANCEL.
        #expect(await carol.wait(timeout: .seconds(10)) { lines.contains("carol: call replaces \(cl.callID) (Referred-By \(l.aor))") },
                "\(Self.context(lines, l))")
        #expect(await carol.wait(cl, timeout: .seconds(10)) { $0 == .terminated(.cancelled) }, "\(Self.context(lines, l))")
        let bc = try #require(carol.incomingCalls.first, "\(Self.context(lines, l))")
        #expect(await carol.wait(bc, timeout: .seconds(10)) { $0 == .confirmed }, "\(Self.context(lines, l))")
        #expect(await Self.notified(bob, lines), "\(Self.context(lines, l))")
        #expect(await bob.wait(lb, timeout: .seconds(10)) { $0 == .terminated(.remoteHangup) }, "\(Self.context(lines, l))")
        #expect(await Self.hears(carol, bc), "\(Self.context(lines, l))")
    }

    @Test("linphonec's attended transfer to a call it placed: Refer-To loses carol's port, so bob's INVITE goes through the registrar carol registered with",
          .timeLimit(.minutes(1)))
    func linphoneAttendedTransferThroughRegistrar() async throws {
        let l = try await Linphone.start()
        defer { Linphone.stop(l) }
        let lines = Lines()
        // Our registrar and proxy for the domain 127.0.0.1 (addresses of record without a port).
        let box = Mutex<ProxyServer?>(nil)
        let pe = try SIPEndpoint(configuration: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))])) { e in box.withLock { $0 }?.handle(e) }
        defer { pe.close() }
        let proxy = ProxyServer(configuration: .init(domain: "127.0.0.1", users: ["carol": "carolpw"]))
        proxy.attach(pe)
        box.withLock { $0 = proxy }
        let registrar = try SIPURI("sip:127.0.0.1:\(pe.localAddresses[0].address.port)")
        let bob = try Self.phone("bob", lines, tone: 700, proxy: registrar), carol = try Self.phone("carol", lines, tone: 1100, password: "carolpw")
        defer { bob.close(); carol.close() }
        await carol.agent.register(registrar: registrar, expires: 120)
        try #require(await carol.wait(timeout: .seconds(10)) { carol.registrationStates.contains { if case .registered = $0 { return true } else { return false } } },
                     "\(lines.all)")

        let lb = try await Self.linphoneCalls(bob, l, lines)
        try Linphone.send(l, "pause 1")
        try #require(await Linphone.waitFor(l, "is now paused."), "\(Self.context(lines, l))")
        try Linphone.send(l, "call \(try Self.uri(carol, "carol"))")
        try #require(await carol.wait(timeout: .seconds(10)) { carol.incomingCalls.count == 1 }, "\(Self.context(lines, l))")
        let cl = carol.incomingCalls[0]
        try #require(await carol.wait(cl, timeout: .seconds(10)) { $0 == .confirmed }, "\(Self.context(lines, l))")
        try #require(await Linphone.waitFor(l, "Media streams established with sip:carol@"), "\(Self.context(lines, l))")
        try await attended(l, bob: bob, carol: carol, lb: lb, consultation: cl, referTo: "sip:carol@127.0.0.1", lines)
        #expect(proxy.statistics.forwarded >= 1, "bob's INVITE went through the proxy")
    }

    @Test("we transfer linphonec: 202, it calls carol with our Referred-By and its audio, NOTIFYs end in a terminating 200; alice hangs up",
          .timeLimit(.minutes(1)))
    func weTransferLinphone() async throws {
        let l = try await Linphone.start()
        defer { Linphone.stop(l) }
        let lines = Lines()
        let alice = try Self.phone("alice", lines), carol = try Self.phone("carol", lines, tone: 1100)
        defer { alice.close(); carol.close() }
        let key = await alice.call(try SIPURI("sip:lin@127.0.0.1:\(l.sipPort)"))
        try #require(await alice.wait(key, timeout: .seconds(10)) { $0 == .confirmed }, "\(Self.context(lines, l))")
        try #require(await Linphone.waitFor(l, "Media streams established with sip:alice@"), "\(Self.context(lines, l))")
        let target = try Self.uri(carol, "carol")
        let outcome = await alice.transfer(key, to: target, notifyTimeout: .seconds(10))
        #expect(outcome == .succeeded(200), "\(Self.context(lines, l))")
        // Its NOTIFYs: 100 Trying, then "SIP/2.0 200 Ok" ending the subscription with
        // `terminated;reason=reason=noresource` (sic), taken for its state.
        let frags = lines.all.filter { $0.hasPrefix("alice got sipfrag ") }
        #expect(frags.first?.hasPrefix("alice got sipfrag SIP/2.0 100 ") == true, "\(frags)")
        #expect(frags.last?.hasPrefix("alice got sipfrag SIP/2.0 200 ") == true && frags.last?.contains("[terminated") == true, "\(frags)")
        #expect(lines.count("alice: NOTIFY") == 0, "alice sends no NOTIFY")
        #expect(await alice.wait(key, timeout: .seconds(10)) { $0 == .terminated(.localHangup) }, "\(Self.context(lines, l))")
        // linphonec's new call: to carol, referred by alice, up, and carrying its file's audio.
        try #require(carol.incomingCalls.count == 1, "\(Self.context(lines, l))")
        let lc = carol.incomingCalls[0]
        #expect(await carol.wait(timeout: .seconds(10)) { lines.contains("carol: incoming call from \(l.aor) (Referred-By sip:alice@127.0.0.1)") },
                "\(Self.context(lines, l))")
        #expect(await carol.wait(lc, timeout: .seconds(10)) { $0 == .confirmed })
        #expect(await Self.hears(linphoneCaller: carol, lc, l), "\(Self.context(lines, l))")
    }

    @Test("we transfer linphonec attended: it calls carol with our Replaces, carol ends our consultation, its NOTIFYs end in 200",
          .timeLimit(.minutes(1)))
    func weTransferLinphoneAttended() async throws {
        let l = try await Linphone.start()
        defer { Linphone.stop(l) }
        let lines = Lines()
        let alice = try Self.phone("alice", lines), carol = try Self.phone("carol", lines, tone: 1100)
        defer { alice.close(); carol.close() }
        let al = await alice.call(try SIPURI("sip:lin@127.0.0.1:\(l.sipPort)"))
        try #require(await alice.wait(al, timeout: .seconds(10)) { $0 == .confirmed }, "\(Self.context(lines, l))")
        try #require(await Linphone.waitFor(l, "Media streams established with sip:alice@"), "\(Self.context(lines, l))")
        let ac = await alice.call(try Self.uri(carol, "carol"))
        try #require(await alice.wait(ac, timeout: .seconds(10)) { $0 == .confirmed }, "\(Self.context(lines, l))")
        let outcome = await alice.transfer(al, replacing: ac, notifyTimeout: .seconds(10))
        #expect(outcome == .succeeded(200), "\(Self.context(lines, l))")
        #expect(await alice.wait(al, timeout: .seconds(10)) { $0 == .terminated(.localHangup) }, "\(Self.context(lines, l))")
        #expect(await carol.wait(timeout: .seconds(10)) { lines.contains("carol: call replaces \(ac.callID) (Referred-By sip:alice@127.0.0.1)") },
                "\(Self.context(lines, l))")
        #expect(await alice.wait(ac, timeout: .seconds(10)) { $0 == .terminated(.remoteHangup) }, "carol ended the consultation")
        let lc = try #require(carol.incomingCalls.first { $0.callID != ac.callID }, "\(Self.context(lines, l))")
        #expect(await carol.wait(lc, timeout: .seconds(10)) { $0 == .confirmed })
        #expect(await Self.hears(linphoneCaller: carol, lc, l), "\(Self.context(lines, l))")
    }

    @Test("linphonec as the target of our attended transfer: bob's INVITE with Replaces reaches its Contact, it takes bob and hangs up on alice",
          .timeLimit(.minutes(1)))
    func linphoneAsAttendedTarget() async throws {
        let l = try await Linphone.start()
        defer { Linphone.stop(l) }
        let lines = Lines()
        let alice = try Self.phone("alice", lines), bob = try Self.phone("bob", lines, tone: 700)
        defer { alice.close(); bob.close() }
        let ab = await alice.call(try Self.uri(bob, "bob"))
        try #require(await alice.wait(ab, timeout: .seconds(10)) { $0 == .confirmed }, "\(Self.context(lines, l))")
        let al = await alice.call(try SIPURI("sip:lin@127.0.0.1:\(l.sipPort)"))
        try #require(await alice.wait(al, timeout: .seconds(10)) { $0 == .confirmed }, "\(Self.context(lines, l))")
        try #require(await Linphone.waitFor(l, "Media streams established with sip:alice@"), "\(Self.context(lines, l))")
        let outcome = await alice.transfer(ab, replacing: al, notifyTimeout: .seconds(10))
        #expect(outcome == .succeeded(200), "\(Self.context(lines, l))")
        #expect(await alice.wait(ab, timeout: .seconds(10)) { $0 == .terminated(.localHangup) }, "\(Self.context(lines, l))")
        // RFC 3891: the target ends the replaced dialog itself.
        #expect(await alice.wait(al, timeout: .seconds(10)) { $0 == .terminated(.remoteHangup) }, "\(Self.context(lines, l))")
        let bl = try #require(Self.calls(bob).first { $0.callID != ab.callID }, "\(Self.context(lines, l))")
        #expect(await bob.wait(bl, timeout: .seconds(10)) { $0 == .confirmed }, "\(Self.context(lines, l))")
        #expect(await Self.hears(linphoneCaller: bob, bl, l), "\(Self.context(lines, l))")
    }
}
