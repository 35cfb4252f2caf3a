// PhoneLoad: our own caller for scripts/bench-phone — one `Phone` (the Switchboard library)
// placing CALLS calls at RATE per second to TARGET, each sending a 440 Hz tone in G.711 A-law
// (and taking the peer's audio) for HOLD seconds, then hanging up. Prints the calls that were
// established and its own CPU time and peak RSS (the outgoing side of the call API).
//
// usage: PhoneLoad TARGET CALLS RATE HOLD [LOW-HIGH]   (RTP ports; default 10000-19999)
import Foundation
import MediaRuntime
import NetworkIO
import SDP
import SIPMessage
import SIPRuntime
import Switchboard

let arguments = CommandLine.arguments
guard arguments.count >= 5, let target = try? SIPURI(arguments[1]), let calls = Int(arguments[2]), calls > 0,
      let rate = Double(arguments[3]), rate > 0, let hold = Double(arguments[4]), hold >= 0
else {
    FileHandle.standardError.write(Data("usage: PhoneLoad TARGET CALLS RATE HOLD [LOW-HIGH]\n".utf8))
    exit(64)
}
var ports: ClosedRange<UInt16> = 10000...19999
if arguments.count > 5 {
    let p = arguments[5].split(separator: "-").compactMap { UInt16($0) }
    guard p.count == 2, p[0] < p[1] else { FileHandle.standardError.write(Data("bad port range\n".utf8)); exit(64) }
    ports = p[0]...p[1]
}

var configuration = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))]),
                                               identity: try SIPURI("sip:load@127.0.0.1"))
configuration.sessionTimer = nil
let media = PhoneMediaOptions(configuration: MediaSessionConfiguration(localAddress: "127.0.0.1", portRange: ports, codecs: [.pcma, .telephoneEvent]),
                              input: .tone(frequency: 440))
let phone = try Phone(name: "load", configuration: configuration, codecs: [.pcma, .telephoneEvent], media: media, metrics: nil)

let clock = ContinuousClock()
let start = clock.now
let established = await withTaskGroup(of: Bool.self) { group -> Int in
    for i in 0..<calls {
        try? await Task.sleep(until: start + .seconds(Double(i) / rate), clock: clock)
        group.addTask {
            let call = await phone.dial(target)
            let state = try? await call.waitUntil(timeout: .seconds(30)) { $0.isEstablished || $0.isEnded }
            guard state?.isEstablished == true else { return false }
            try? await Task.sleep(for: .seconds(hold))
            await call.hangUp(timeout: .seconds(10))
            return true
        }
    }
    var n = 0
    for await ok in group where ok { n += 1 }
    return n
}
await phone.shutdown(timeout: .seconds(5))
var usage = rusage()
getrusage(RUSAGE_SELF.rawValue, &usage)
let cpu = Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
print("calls=\(calls) established=\(established) cpu_s=\(String(format: "%.2f", cpu)) peak_rss_kb=\(usage.ru_maxrss)")
exit(established == calls ? 0 : 1)
