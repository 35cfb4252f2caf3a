import Foundation

/// A SIPp XML scenario, parsed and checked: every element, attribute and keyword is one this
/// runner executes, or the parse fails with ``SIPpScenarioError`` naming it and its line.
public struct SIPpScenario: Sendable {
    /// The `name` attribute of `<scenario>`.
    public var name: String
    /// The commands in order (labels are not commands: they name the index of the next one, as
    /// in SIPp, so `<jump value="N"/>` counts the same way).
    public var commands: [SIPpCommand]
    /// Label id → index of the command that follows it.
    public var labels: [String: Int]

    /// Whether the scenario starts by sending (a UAC: calls are placed at the rate) rather than
    /// by receiving (a UAS: calls start when a matching request arrives).
    public var startsBySending: Bool {
        if case .send = commands.first?.kind { return true }
        return false
    }

    /// Parses and checks a scenario. `keys` are the names given with `-key` (substituted as
    /// `[name]`); any other unknown keyword is refused.
    public static func parse(_ text: String, keys: Set<String> = []) throws(SIPpScenarioError) -> SIPpScenario {
        let root = try XMLReader.parse(text)
        var p = ScenarioBuilder(keys: keys)
        return try p.build(root)
    }
}

/// One step of a scenario.
public struct SIPpCommand: Sendable {
    /// What the step does.
    public enum Kind: Sendable {
        /// Send a message (the template, and the first retransmission interval in ms over UDP).
        case send(template: SIPpTemplate, retransmit: Int?)
        /// Wait for a message.
        case recv(SIPpReceive)
        /// Wait: a fixed time (`nil` milliseconds is the `-d` default), a random one, or a
        /// variable's value (`<pause>`, `<timewait>`).
        case pause(SIPpDuration)
        /// Do nothing but the actions.
        case nop
    }
    /// What the step does.
    public var kind: Kind
    /// Label to continue at afterwards (`next`), when `test` (if any) holds.
    public var next: String?
    /// The variable that must be true for `next` to be taken.
    public var test: String?
    /// The probability (0…1) that `next` is taken (`chance`), when `test` (if any) holds.
    public var chance: Double?
    /// Actions executed once the step is done (a message received, sent, the nop reached).
    public var actions: [SIPpAction]
    /// Response-time counter started here (`start_rtd`).
    public var startRTD: String?
    /// Response-time counter stopped here (`rtd`).
    public var rtd: String?
    /// The line of the element.
    public var line: Int
}

/// What a `<recv>` waits for.
public struct SIPpReceive: Sendable {
    /// A request method (`request="INVITE"`), or
    public var request: String?
    /// a response status code (`response="200"`).
    public var response: Int?
    /// For responses: the method of the request the scenario sent last before this step (SIPp
    /// matches a response to it through the CSeq method).
    public var responseMethod: String?
    /// Whether the message may not come (`optional="true"`).
    public var optional: Bool
    /// Milliseconds to wait before the call fails (or goes to `onTimeout`).
    public var timeout: Int?
    /// Label to go to on timeout.
    public var onTimeout: String?
    /// Whether the message's Record-Route set and Contact are kept for `[routes]` and
    /// `[next_url]` (`rrs="true"`).
    public var recordRoutes = false
    /// Whether a 401/407 received here is the challenge `[authentication]` answers
    /// (`auth="true"`).
    public var authentication = false
}

/// How long a `<pause>` lasts.
public enum SIPpDuration: Sendable, Hashable {
    /// Milliseconds written in the scenario; `nil`: the `-d` default.
    case fixed(Int?)
    /// Drawn from a distribution, in milliseconds (rounded, clamped to 0…a day).
    case random(SIPpDistribution)
    /// The value of a variable, in milliseconds.
    case variable(String)
}

/// SIPp's distributions (`<pause distribution=…>`, `<sample>`), with SIPp's parameter names.
public enum SIPpDistribution: Sendable, Hashable {
    /// `fixed`: `value`.
    case fixed(value: Double)
    /// `uniform`: `min`, `max`.
    case uniform(min: Double, max: Double)
    /// `normal`: `mean`, `stdev`.
    case normal(mean: Double, stdev: Double)
    /// `lognormal`: `mean` and `stdev` of the logarithm.
    case lognormal(mean: Double, stdev: Double)
    /// `exponential`: `mean`.
    case exponential(mean: Double)
    /// `weibull`: scale `lambda`, shape `k`.
    case weibull(lambda: Double, k: Double)
    /// `pareto`: shape `k`, scale `x_m`.
    case pareto(k: Double, xm: Double)
    /// `gamma`: shape `k`, scale `theta`.
    case gamma(k: Double, theta: Double)
    /// `negbin`: failures before `n` successes of probability `p`.
    case negbin(n: Double, p: Double)

    /// One value drawn with `generator`.
    public func sample<R: RandomNumberGenerator>(using generator: inout R) -> Double {
        // U in (0, 1]: never 0, so that logarithms and powers stay finite.
        func unit() -> Double { 1 - Double.random(in: 0..<1, using: &generator) }
        func gaussian() -> Double {
            // Box–Muller.
            (-2 * Foundation.log(unit())).squareRoot() * Foundation.cos(2 * Double.pi * unit())
        }
        func gammaDraw(_ k: Double, _ theta: Double) -> Double {
            // Marsaglia and Tsang; for k < 1, Gamma(k+1)·U^(1/k).
            if k < 1 { return gammaDraw(k + 1, theta) * Foundation.pow(unit(), 1 / k) }
            let d = k - 1.0 / 3, c = 1 / (9 * d).squareRoot()
            for _ in 0..<1000 {
                var x = 0.0, v = 0.0
                repeat { x = gaussian(); v = 1 + c * x } while v <= 0
                v = v * v * v
                let u = unit()
                if Foundation.log(u) < 0.5 * x * x + d - d * v + d * Foundation.log(v) { return d * v * theta }
            }
            return d * theta
        }
        switch self {
        case .fixed(let v): return v
        case .uniform(let a, let b): return a + (b - a) * Double.random(in: 0..<1, using: &generator)
        case .normal(let m, let s): return m + s * gaussian()
        case .lognormal(let m, let s): return Foundation.exp(m + s * gaussian())
        case .exponential(let m): return -m * Foundation.log(unit())
        case .weibull(let l, let k): return l * Foundation.pow(-Foundation.log(unit()), 1 / k)
        case .pareto(let k, let xm): return xm / Foundation.pow(unit(), 1 / k)
        case .gamma(let k, let theta): return gammaDraw(k, theta)
        case .negbin(let n, let p):
            // A Poisson draw whose mean is Gamma(n, (1-p)/p) (bounded: the mean is capped).
            guard p < 1 else { return 0 }
            let mean = Swift.min(gammaDraw(n, (1 - p) / p), 1e6)
            if mean > 500 { return Swift.max(0, (mean + mean.squareRoot() * gaussian()).rounded()) }
            let limit = Foundation.exp(-mean)
            var k = 0.0, prod = unit()
            while prod > limit && k < 1e6 { prod *= unit(); k += 1 }
            return k
        }
    }
}

/// SIPp's internal commands (`<exec int_cmd=…>`).
public enum SIPpInternalCommand: String, Sendable, Hashable {
    /// `stop_call`: on a `recv`, the call ends here, failed; ignored on a `send` or `nop`
    /// (SIPp 3.6 does the same).
    case stopCall = "stop_call"
    /// `stop_gracefully`: no new call; the calls running end by themselves.
    case stopGracefully = "stop_gracefully"
    /// `stop_now`: the run ends at once (exit code 97, as SIPp's).
    case stopNow = "stop_now"
}

/// An action of a step (`<action>` children).
public enum SIPpAction: Sendable {
    /// Where `ereg` searches.
    public enum SearchIn: Sendable, Hashable {
        /// The whole message.
        case message
        /// The body.
        case body
        /// The value of a header (every line of it, joined with ", ").
        case header(String)
    }
    /// `<ereg>`: the regular expression, where to look, whether a miss fails the call (or a
    /// hit, for `check_it_inverse`), the variables assigned (the whole match, then the groups).
    case ereg(pattern: String, searchIn: SearchIn, checkIt: Bool, checkItInverse: Bool, caseIndependent: Bool, assignTo: [String], line: Int)
    /// `<assign>`: a number (or another variable's value) into a variable.
    case assign(variable: String, value: SIPpOperand)
    /// `<assignstr>`: a template's text into a variable.
    case assignString(variable: String, value: SIPpTemplate)
    /// `<add>`, `<multiply>`, `<divide>`.
    case arithmetic(op: SIPpArithmetic, variable: String, value: SIPpOperand)
    /// `<test>`: compares a variable with a number or another variable, into a boolean.
    case test(assignTo: String, variable: String, compare: SIPpComparison, value: SIPpOperand)
    /// `<strcmp>`: compares a variable's text with a string or another variable's, into a number
    /// (0 when equal, negative or positive as C's strcmp).
    case strcmp(assignTo: String, variable: String, value: SIPpStringOperand)
    /// `<jump>`: continue at a command index (a number or a variable's value).
    case jump(SIPpOperand)
    /// `<log>`: a line written to the log (`-trace_logs`).
    case log(SIPpTemplate)
    /// `<sample>`: a value drawn from a distribution into a variable.
    case sample(assignTo: String, SIPpDistribution)
    /// `<exec command=…>`: a shell command (`/bin/sh -c`), started without waiting for it.
    case execCommand(SIPpTemplate)
    /// `<exec int_cmd=…>`.
    case execInternal(SIPpInternalCommand)
}

/// A number or a variable holding one.
public enum SIPpOperand: Sendable, Hashable {
    /// A number written in the scenario.
    case number(Double)
    /// The value of a variable, as a number.
    case variable(String)
}

/// A string or a variable holding one.
public enum SIPpStringOperand: Sendable, Hashable {
    /// A string written in the scenario.
    case string(String)
    /// The value of a variable, as text.
    case variable(String)
}

/// The arithmetic actions.
public enum SIPpArithmetic: String, Sendable, Hashable {
    /// `<add>`: the variable plus the value.
    case add
    /// `<multiply>`: the variable times the value.
    case multiply
    /// `<divide>`: the variable divided by the value (a division by zero fails the call).
    case divide
}

/// The comparisons of `<test>`.
public enum SIPpComparison: String, Sendable, Hashable {
    /// `equal`.
    case equal
    /// `not_equal`.
    case notEqual = "not_equal"
    /// `greater_than`.
    case greaterThan = "greater_than"
    /// `less_than`.
    case lessThan = "less_than"
    /// `greater_than_equal`.
    case greaterThanEqual = "greater_than_equal"
    /// `less_than_equal`.
    case lessThanEqual = "less_than_equal"
}

/// A message (or value) with its `[keywords]`, split once at parse time.
public struct SIPpTemplate: Sendable {
    /// A piece of the template.
    public enum Segment: Sendable, Hashable {
        /// Text sent as it is.
        case text(String)
        /// A keyword replaced when the message is sent.
        case keyword(SIPpKeyword)
    }
    /// The pieces in order.
    public var segments: [Segment]
}

/// The keywords this runner substitutes.
public enum SIPpKeyword: Sendable, Hashable {
    /// `[service]` (`-s`).
    case service
    /// `[remote_ip]`, `[remote_port]`: the call's peer.
    case remoteIP, remotePort
    /// `[local_ip]`, `[local_port]`: the runner's address.
    case localIP, localPort
    /// `[transport]`: `UDP`.
    case transport
    /// `[media_ip]`, `[media_port]` (`-mi`, `-mp`).
    case mediaIP, mediaPort
    /// `[media_ip_type]`, `[local_ip_type]`: 4 or 6.
    case mediaIPType, localIPType
    /// `[pid]`: the process id.
    case pid
    /// `[branch]`, `[branch-N]`: a branch unique to the call and the command (N commands back).
    case branch(offset: Int)
    /// `[call_id]`: `<call number>-<pid>@<local_ip>`.
    case callID
    /// `[call_number]`: 1 for the first call, and so on.
    case callNumber
    /// `[cseq]`, `[cseq+N]`.
    case cseq(offset: Int)
    /// `[len]`: the body's length in bytes.
    case len
    /// `[last_Name:]`: every line of that header of the last message received, as `Name: value`.
    case last(header: String)
    /// `[peer_tag_param]`: `;tag=` and the peer's tag.
    case peerTagParam
    /// `[$name]`.
    case variable(String)
    /// `[fieldN]` from the `-inf` file.
    case field(Int)
    /// A `-key` value.
    case key(String)
    /// `[routes]`: `Route:` with the route set kept by a `recv rrs="true"` (nothing without one).
    case routes
    /// `[next_url]`: the Contact URI of the message kept by a `recv rrs="true"`.
    case nextURL
    /// `[last_Request_URI]`: the Request-URI of the last request received.
    case lastRequestURI
    /// `[clock_tick]`: milliseconds since the run started.
    case clockTick
    /// `[timestamp]`: the time now, as SIPp writes it (date, tab, time with microseconds,
    /// tab, seconds since 1970).
    case timestamp
    /// `[users]`: the `-users` count (0 without it).
    case users
    /// `[userid]`: the call's user (its number without `-users`).
    case userID
    /// `[authentication username=… password=…]`: the `Authorization:` (after a 401) or
    /// `Proxy-Authorization:` (after a 407) header answering the challenge of the last
    /// `recv auth="true"`, digest MD5 (RFC 2617/7616).
    case authentication(username: String, password: String)
}

struct ScenarioBuilder {
    let keys: Set<String>
    var commands: [SIPpCommand] = []
    var labels: [String: Int] = [:]
    var labelLines: [(String, Int, String)] = []   // label references to check: (label, line, element)
    var lastRequestMethod: String?
    /// Every variable's references and the line of its first, for SIPp's rule that a variable
    /// used only once (set and never read, or read and never set) is an error in the scenario.
    var references: [String: (count: Int, line: Int, element: String)] = [:]

    mutating func reference(_ name: String, _ e: XMLElement) {
        if let r = references[name] { references[name] = (r.count + 1, r.line, r.element) } else { references[name] = (1, e.line, e.name) }
    }

    init(keys: Set<String>) { self.keys = keys }

    func err(_ e: XMLElement, _ kind: SIPpScenarioError.Kind) -> SIPpScenarioError {
        SIPpScenarioError(line: e.line, element: e.name, kind: kind)
    }

    /// Refuses any attribute of `e` outside `allowed`.
    func only(_ e: XMLElement, _ allowed: Set<String>) throws(SIPpScenarioError) {
        for a in e.attributes where !allowed.contains(a.name) {
            throw err(e, .unsupportedAttribute(a.name))
        }
    }

    func bool(_ e: XMLElement, _ name: String) throws(SIPpScenarioError) -> Bool {
        guard let v = e[name] else { return false }
        switch v.lowercased() {
        case "true", "1", "yes": return true
        case "false", "0", "no": return false
        default:
            if name == "optional" && v == "global" { throw err(e, .invalidValue(attribute: name, value: v, reason: "optional=\"global\" is not supported")) }
            throw err(e, .invalidValue(attribute: name, value: v, reason: "true or false expected"))
        }
    }

    /// A whole number of milliseconds from `min` to a day.
    func int(_ e: XMLElement, _ name: String, min: Int = 0) throws(SIPpScenarioError) -> Int? {
        guard let v = e[name] else { return nil }
        guard let n = Int(v.trimmingSpaces), n >= min, n <= 86_400_000 else {
            throw err(e, .invalidValue(attribute: name, value: v, reason: "a whole number of milliseconds from \(min) to 86400000 expected"))
        }
        return n
    }

    /// `rtd="true"` is counter "1", as in SIPp.
    func rtdName(_ e: XMLElement, _ name: String) -> String? {
        guard let v = e[name] else { return nil }
        return v.lowercased() == "true" ? "1" : v
    }

    mutating func build(_ root: XMLElement) throws(SIPpScenarioError) -> SIPpScenario {
        guard root.name == "scenario" else { throw err(root, .invalidScenario("the root element must be <scenario>, not <\(root.name)>")) }
        try only(root, ["name"])
        for child in root.children {
            switch child.name {
            case "send": try send(child)
            case "recv": try recv(child)
            case "pause", "timewait": try pause(child)
            case "nop": try nop(child)
            case "label":
                try only(child, ["id"])
                guard let id = child["id"], !id.isEmpty else { throw err(child, .missingAttribute("id")) }
                guard labels[id] == nil else { throw err(child, .invalidValue(attribute: "id", value: id, reason: "label defined twice")) }
                guard child.children.isEmpty else { throw err(child, .unsupportedElement(child.children[0].name)) }
                labels[id] = commands.count
            case "ResponseTimeRepartition", "CallLengthRepartition":
                // Statistics layout only (histogram bounds of SIPp's screens): no effect on a run.
                try only(child, ["value"])
            case "Reference", "Global":
                // Declarations of variables (each counts as a reference, as in SIPp).
                try only(child, ["variables"])
                for v in (child["variables"] ?? "").split(separator: ",") where !v.trimmingSpaces.isEmpty { reference(v.trimmingSpaces, child) }
            default:
                throw err(child, .unsupportedElement(child.name))
            }
        }
        guard !commands.isEmpty else { throw err(root, .invalidScenario("the scenario has no send, recv, pause or nop")) }
        if case .pause = commands[0].kind { throw SIPpScenarioError(line: commands[0].line, element: "pause", kind: .invalidScenario("a scenario must start with send or recv")) }
        if case .nop = commands[0].kind { throw SIPpScenarioError(line: commands[0].line, element: "nop", kind: .invalidScenario("a scenario must start with send or recv")) }
        for (name, r) in references.sorted(by: { $0.value.line < $1.value.line }) where r.count == 1 {
            throw SIPpScenarioError(line: r.line, element: r.element, kind: .invalidScenario("variable $\(name) is referenced only once (SIPp refuses this too)"))
        }
        for (label, line, element) in labelLines where labels[label] == nil {
            throw SIPpScenarioError(line: line, element: element, kind: .unknownLabel(label))
        }
        return SIPpScenario(name: root["name"] ?? "", commands: commands, labels: labels)
    }

    mutating func common(_ e: XMLElement) throws(SIPpScenarioError) -> (next: String?, test: String?, chance: Double?) {
        var chance: Double?
        if let c = e["chance"] {
            guard let d = Double(c.trimmingSpaces), d >= 0, d <= 1 else { throw err(e, .invalidValue(attribute: "chance", value: c, reason: "a probability from 0 to 1 expected")) }
            guard e["next"] != nil else { throw err(e, .invalidValue(attribute: "chance", value: c, reason: "chance needs next")) }
            chance = d
        }
        if let n = e["next"] { labelLines.append((n, e.line, e.name)) }
        if let t = e["test"] { reference(t, e) }
        if e["test"] != nil && e["next"] == nil { throw err(e, .invalidValue(attribute: "test", value: e["test"]!, reason: "test needs next")) }
        return (e["next"], e["test"], chance)
    }

    /// A distribution named by `distribution=` with SIPp's parameters (of `e`).
    func distribution(_ e: XMLElement) throws(SIPpScenarioError) -> SIPpDistribution {
        let name = try required(e, "distribution")
        func positive(_ attribute: String) throws(SIPpScenarioError) -> Double {
            let v = try number(e, attribute)
            guard v > 0, v.isFinite else { throw err(e, .invalidValue(attribute: attribute, value: e[attribute]!, reason: "a positive number expected")) }
            return v
        }
        func finite(_ attribute: String) throws(SIPpScenarioError) -> Double {
            let v = try number(e, attribute)
            guard v.isFinite, abs(v) <= 1e12 else { throw err(e, .invalidValue(attribute: attribute, value: e[attribute]!, reason: "a number up to 10^12 expected")) }
            return v
        }
        switch name {
        case "fixed": return .fixed(value: try finite("value"))
        case "uniform":
            let a = try finite("min"), b = try finite("max")
            guard a <= b else { throw err(e, .invalidValue(attribute: "max", value: e["max"]!, reason: "max below min")) }
            return .uniform(min: a, max: b)
        case "normal": return .normal(mean: try finite("mean"), stdev: try positive("stdev"))
        case "lognormal":
            let m = try finite("mean"), s = try positive("stdev")
            guard m <= 30, s <= 10 else { throw err(e, .invalidValue(attribute: "mean", value: e["mean"]!, reason: "mean up to 30 and stdev up to 10 (of the logarithm)")) }
            return .lognormal(mean: m, stdev: s)
        case "exponential": return .exponential(mean: try positive("mean"))
        case "weibull": return .weibull(lambda: try positive("lambda"), k: try positive("k"))
        case "pareto": return .pareto(k: try positive("k"), xm: try positive("x_m"))
        case "gamma": return .gamma(k: try positive("k"), theta: try positive("theta"))
        case "negbin":
            let p = try positive("p")
            guard p <= 1 else { throw err(e, .invalidValue(attribute: "p", value: e["p"]!, reason: "a probability expected")) }
            return .negbin(n: try positive("n"), p: p)
        default:
            throw err(e, .invalidValue(attribute: "distribution", value: name, reason: "fixed, uniform, normal, lognormal, exponential, weibull, pareto, gamma or negbin expected"))
        }
    }

    mutating func actions(_ e: XMLElement) throws(SIPpScenarioError) -> [SIPpAction] {
        var out: [SIPpAction] = []
        for child in e.children {
            guard child.name == "action" else { throw err(child, .unsupportedElement(child.name)) }
            try only(child, [])
            for a in child.children { out.append(try action(a)) }
        }
        return out
    }

    func required(_ e: XMLElement, _ name: String) throws(SIPpScenarioError) -> String {
        guard let v = e[name], !v.isEmpty else { throw err(e, .missingAttribute(name)) }
        return v
    }

    func number(_ e: XMLElement, _ name: String) throws(SIPpScenarioError) -> Double {
        let v = try required(e, name)
        guard let d = Double(v.trimmingSpaces) else { throw err(e, .invalidValue(attribute: name, value: v, reason: "a number expected")) }
        return d
    }

    /// `value="N"` or `variable="v"`.
    func operand(_ e: XMLElement, variableAttribute: String = "variable") throws(SIPpScenarioError) -> SIPpOperand {
        if let v = e[variableAttribute], e["value"] == nil { return .variable(v) }
        return .number(try number(e, "value"))
    }

    mutating func action(_ a: XMLElement) throws(SIPpScenarioError) -> SIPpAction {
        guard a.children.isEmpty else { throw err(a.children[0], .unsupportedElement(a.children[0].name)) }
        for attr in ["assign_to", "variable", "variable2"] {
            for v in (a[attr] ?? "").split(separator: ",") where !v.trimmingSpaces.isEmpty { reference(v.trimmingSpaces, a) }
        }
        switch a.name {
        case "ereg":
            try only(a, ["regexp", "search_in", "header", "check_it", "check_it_inverse", "assign_to", "case_indep"])
            let pattern = try required(a, "regexp")
            do { _ = try Regex(pattern) } catch {
                throw err(a, .invalidValue(attribute: "regexp", value: pattern, reason: "not a valid regular expression"))
            }
            let searchIn: SIPpAction.SearchIn
            switch a["search_in"] ?? "msg" {
            case "msg": searchIn = .message
            case "body": searchIn = .body
            case "hdr":
                var h = try required(a, "header")
                if h.hasSuffix(":") { h.removeLast() }
                searchIn = .header(h)
            case let other: throw err(a, .invalidValue(attribute: "search_in", value: other, reason: "msg, hdr or body expected"))
            }
            if a["header"] != nil, searchIn == .message || searchIn == .body { throw err(a, .invalidValue(attribute: "header", value: a["header"]!, reason: "header needs search_in=\"hdr\"")) }
            let assign = (a["assign_to"] ?? "").split(separator: ",").map { String($0).trimmingSpaces }.filter { !$0.isEmpty }
            return .ereg(pattern: pattern, searchIn: searchIn, checkIt: try bool(a, "check_it"), checkItInverse: try bool(a, "check_it_inverse"),
                         caseIndependent: try bool(a, "case_indep"), assignTo: assign, line: a.line)
        case "assign":
            try only(a, ["assign_to", "value", "variable"])
            return .assign(variable: try required(a, "assign_to"), value: try operand(a))
        case "assignstr":
            try only(a, ["assign_to", "value"])
            return .assignString(variable: try required(a, "assign_to"), value: try template(try required(a, "value"), a, lineEnds: false))
        case "add", "multiply", "divide":
            try only(a, ["assign_to", "value", "variable"])
            let op = SIPpArithmetic(rawValue: a.name)!
            let value = try operand(a)
            if op == .divide, value == .number(0) { throw err(a, .invalidValue(attribute: "value", value: a["value"]!, reason: "division by zero")) }
            return .arithmetic(op: op, variable: try required(a, "assign_to"), value: value)
        case "test":
            try only(a, ["assign_to", "variable", "compare", "value", "variable2"])
            let c = try required(a, "compare")
            guard let compare = SIPpComparison(rawValue: c) else { throw err(a, .invalidValue(attribute: "compare", value: c, reason: "equal, not_equal, greater_than, less_than, greater_than_equal or less_than_equal expected")) }
            let value: SIPpOperand
            if let v2 = a["variable2"] { value = .variable(v2) } else { value = .number(try number(a, "value")) }
            return .test(assignTo: try required(a, "assign_to"), variable: try required(a, "variable"), compare: compare, value: value)
        case "strcmp":
            try only(a, ["assign_to", "variable", "value", "variable2"])
            let value: SIPpStringOperand
            if let v2 = a["variable2"] { value = .variable(v2) } else { value = .string(try required(a, "value")) }
            return .strcmp(assignTo: try required(a, "assign_to"), variable: try required(a, "variable"), value: value)
        case "jump":
            try only(a, ["value", "variable"])
            let o = try operand(a)
            if case .number(let n) = o, n < 0 || n >= Double(Int32.max) || n != n.rounded() {
                throw err(a, .invalidValue(attribute: "value", value: a["value"]!, reason: "a command index expected"))
            }
            return .jump(o)
        case "log":
            try only(a, ["message"])
            return .log(try template(try required(a, "message"), a, lineEnds: false))
        case "exec":
            if let c = a["int_cmd"] {
                try only(a, ["int_cmd"])
                guard let command = SIPpInternalCommand(rawValue: c) else { throw err(a, .invalidValue(attribute: "int_cmd", value: c, reason: "stop_call, stop_gracefully or stop_now expected")) }
                return .execInternal(command)
            }
            if let c = a["command"] {
                try only(a, ["command"])
                return .execCommand(try template(c, a, lineEnds: false))
            }
            for name in ["play_pcap_audio", "play_pcap_video", "rtp_stream", "play_pcap_image"] where a[name] != nil {
                throw err(a, .unsupportedAttribute(name))
            }
            throw err(a, .missingAttribute("command or int_cmd"))
        case "sample":
            guard let parameters = Self.distributionParameters(a["distribution"] ?? "") else { _ = try distribution(a); throw err(a, .unsupportedElement(a.name)) }
            try only(a, parameters.union(["assign_to", "distribution"]))
            return .sample(assignTo: try required(a, "assign_to"), try distribution(a))
        case "todouble", "gettimeofday", "setdest", "verifyauth", "lookup", "insert", "replace", "urldecode", "urlencode", "warning", "error", "trim", "index", "rtp_echo", "jump_if":
            throw err(a, .unsupportedElement(a.name))
        default:
            throw err(a, .unsupportedElement(a.name))
        }
    }

    mutating func send(_ e: XMLElement) throws(SIPpScenarioError) {
        try only(e, ["retrans", "crlf", "next", "test", "chance", "rtd", "start_rtd"])
        let (next, test, chance) = try common(e)
        _ = try bool(e, "crlf")
        let retrans = try int(e, "retrans", min: 1)
        let body = e.text
        guard !body.allSatisfy({ $0.isWhitespace }) else { throw err(e, .invalidScenario("a <send> needs a message")) }
        let t = try template(body, e, lineEnds: true)
        // Method of the request, for the responses that follow.
        let first = body.trimmingSpaces.prefix { !$0.isWhitespace }
        if !first.hasPrefix("SIP/") { lastRequestMethod = String(first) }
        commands.append(SIPpCommand(kind: .send(template: t, retransmit: retrans), next: next, test: test, chance: chance, actions: try actions(e),
                                    startRTD: rtdName(e, "start_rtd"), rtd: rtdName(e, "rtd"), line: e.line))
    }

    mutating func recv(_ e: XMLElement) throws(SIPpScenarioError) {
        try only(e, ["request", "response", "optional", "timeout", "ontimeout", "next", "test", "chance", "rtd", "start_rtd", "crlf", "rrs", "auth"])
        let (next, test, chance) = try common(e)
        _ = try bool(e, "crlf")
        var r = SIPpReceive(request: e["request"], response: nil, responseMethod: nil, optional: try bool(e, "optional"), timeout: try int(e, "timeout", min: 1), onTimeout: e["ontimeout"])
        r.recordRoutes = try bool(e, "rrs")
        r.authentication = try bool(e, "auth")
        if let code = e["response"] {
            guard let n = Int(code), (100...699).contains(n) else { throw err(e, .invalidValue(attribute: "response", value: code, reason: "a status code 100–699 expected")) }
            r.response = n
            r.responseMethod = lastRequestMethod
        }
        guard (r.request == nil) != (r.response == nil) else {
            throw err(e, r.request == nil ? .missingAttribute("request or response") : .invalidValue(attribute: "response", value: e["response"]!, reason: "request and response together"))
        }
        if let l = r.onTimeout { labelLines.append((l, e.line, e.name)) }
        if r.onTimeout != nil && r.timeout == nil { throw err(e, .invalidValue(attribute: "ontimeout", value: r.onTimeout!, reason: "ontimeout needs timeout")) }
        commands.append(SIPpCommand(kind: .recv(r), next: next, test: test, chance: chance, actions: try actions(e), startRTD: rtdName(e, "start_rtd"), rtd: rtdName(e, "rtd"), line: e.line))
    }

    /// The parameters (attribute names, as SIPp spells them) of a `distribution` of `<pause>`
    /// and `sample`; nil for a name SIPp does not have.
    static func distributionParameters(_ name: String) -> Set<String>? {
        switch name {
        case "fixed": return ["value"]
        case "uniform": return ["min", "max"]
        case "normal", "lognormal": return ["mean", "stdev"]
        case "exponential": return ["mean"]
        case "weibull": return ["lambda", "k"]
        case "pareto": return ["k", "x_m"]
        case "gamma": return ["k", "theta"]
        case "negbin": return ["n", "p"]
        default: return nil
        }
    }

    mutating func pause(_ e: XMLElement) throws(SIPpScenarioError) {
        // <timewait> is a pause (SIPp keeps the call for it, then ends it as the scenario does).
        var allowed: Set<String> = ["milliseconds", "variable", "distribution", "sanity_check", "next", "test", "chance", "crlf", "rtd", "start_rtd"]
        if let d = e["distribution"] {
            guard let parameters = Self.distributionParameters(d) else { _ = try distribution(e); throw err(e, .unsupportedElement(e.name)) }
            allowed.formUnion(parameters)
        }
        try only(e, allowed)
        let (next, test, chance) = try common(e)
        _ = try bool(e, "crlf")
        _ = try bool(e, "sanity_check")
        guard e.children.isEmpty else { throw err(e.children[0], .unsupportedElement(e.children[0].name)) }
        let duration: SIPpDuration
        if e["distribution"] != nil {
            duration = .random(try distribution(e))
        } else if let v = e["variable"] {
            reference(v, e)
            duration = .variable(v)
        } else {
            duration = .fixed(try int(e, "milliseconds"))
        }
        commands.append(SIPpCommand(kind: .pause(duration), next: next, test: test, chance: chance, actions: [],
                                    startRTD: rtdName(e, "start_rtd"), rtd: rtdName(e, "rtd"), line: e.line))
    }

    mutating func nop(_ e: XMLElement) throws(SIPpScenarioError) {
        try only(e, ["next", "test", "chance", "crlf", "rtd", "start_rtd"])
        let (next, test, chance) = try common(e)
        _ = try bool(e, "crlf")
        commands.append(SIPpCommand(kind: .nop, next: next, test: test, chance: chance, actions: try actions(e), startRTD: rtdName(e, "start_rtd"), rtd: rtdName(e, "rtd"), line: e.line))
    }

    /// Splits `text` at its keywords; for messages (`lineEnds`), lines lose their leading white
    /// space and end in CRLF, as SIPp writes them.
    mutating func template(_ text: String, _ e: XMLElement, lineEnds: Bool) throws(SIPpScenarioError) -> SIPpTemplate {
        var source = text
        if lineEnds {
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { line -> Substring in
                var l = line
                while let f = l.first, f == " " || f == "\t" { l.removeFirst() }
                while let last = l.last, last == "\r" || last == " " || last == "\t" { l.removeLast() }
                return l
            }
            var joined = lines.joined(separator: "\r\n")
            while let f = joined.first, f.isWhitespace { joined.removeFirst() }
            while let l = joined.last, l.isWhitespace { joined.removeLast() }
            // No body: the header section ends with an empty line; a body ends with a CRLF.
            source = joined + (joined.contains("\r\n\r\n") ? "\r\n" : "\r\n\r\n")
        }
        // Checked on the text as written, so that an error names the keyword's own line.
        _ = try split(text, e)
        let segments = try split(source, e)
        for case .keyword(.variable(let v)) in segments { reference(v, e) }
        return SIPpTemplate(segments: segments)
    }

    func split(_ source: String, _ e: XMLElement) throws(SIPpScenarioError) -> [SIPpTemplate.Segment] {
        var segments: [SIPpTemplate.Segment] = []
        var literal = ""
        var rest = Substring(source)
        var line = e.line
        while let open = rest.firstIndex(of: "[") {
            literal += rest[..<open]
            line += rest[..<open].filter { $0 == "\n" || $0 == "\r\n" }.count
            guard let close = rest[open...].firstIndex(of: "]") else {
                throw SIPpScenarioError(line: line, element: e.name, kind: .malformedXML("\"[\" without \"]\" in the message"))
            }
            let word = String(rest[rest.index(after: open)..<close])
            let k = try keyword(word, e, line: line)
            if !literal.isEmpty { segments.append(.text(literal)); literal = "" }
            segments.append(.keyword(k))
            rest = rest[rest.index(after: close)...]
        }
        literal += rest
        if !literal.isEmpty { segments.append(.text(literal)) }
        return segments
    }

    func keyword(_ word: String, _ e: XMLElement, line: Int) throws(SIPpScenarioError) -> SIPpKeyword {
        func offset(_ base: String) -> Int? {
            guard word.hasPrefix(base) else { return nil }
            let tail = word.dropFirst(base.count)
            if tail.isEmpty { return 0 }
            guard let f = tail.first, f == "+" || f == "-", let n = Int(tail.dropFirst()), n <= 1_000_000 else { return nil }
            return f == "+" ? n : -n
        }
        switch word {
        case "service": return .service
        case "remote_ip": return .remoteIP
        case "remote_port": return .remotePort
        case "local_ip": return .localIP
        case "local_port": return .localPort
        case "transport": return .transport
        case "media_ip": return .mediaIP
        case "media_port": return .mediaPort
        case "media_ip_type": return .mediaIPType
        case "local_ip_type": return .localIPType
        case "pid": return .pid
        case "call_id": return .callID
        case "call_number": return .callNumber
        case "len": return .len
        case "peer_tag_param": return .peerTagParam
        case "routes": return .routes
        case "next_url": return .nextURL
        case "last_Request_URI": return .lastRequestURI
        case "clock_tick": return .clockTick
        case "timestamp": return .timestamp
        case "users": return .users
        case "userid": return .userID
        default: break
        }
        if word.hasPrefix("authentication") {
            // [authentication username=joe password=secret]
            var username: String?, password: String?
            for part in word.dropFirst("authentication".count).split(whereSeparator: { $0 == " " || $0 == "\t" }) {
                guard let eq = part.firstIndex(of: "=") else { throw SIPpScenarioError(line: line, element: e.name, kind: .unsupportedKeyword(word)) }
                let v = String(part[part.index(after: eq)...])
                switch part[..<eq] {
                case "username": username = v
                case "password": password = v
                default: throw SIPpScenarioError(line: line, element: e.name, kind: .unsupportedKeyword(word))
                }
            }
            guard let username, let password else { throw SIPpScenarioError(line: line, element: e.name, kind: .unsupportedKeyword(word)) }
            return .authentication(username: username, password: password)
        }
        if let n = offset("branch") { return .branch(offset: n) }
        if let n = offset("cseq") { return .cseq(offset: n) }
        if word.hasPrefix("last_") {
            var h = String(word.dropFirst(5))
            if h.hasSuffix(":") { h.removeLast() }
            guard !h.isEmpty, h.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == "." }) else {
                throw SIPpScenarioError(line: line, element: e.name, kind: .unsupportedKeyword(word))
            }
            return .last(header: h)
        }
        if word.hasPrefix("$"), word.count > 1 { return .variable(String(word.dropFirst())) }
        if word.hasPrefix("field"), let n = Int(word.dropFirst(5)), n >= 0 { return .field(n) }
        if keys.contains(word) { return .key(word) }
        throw SIPpScenarioError(line: line, element: e.name, kind: .unsupportedKeyword(word))
    }
}

extension StringProtocol {
    var trimmingSpaces: String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s.removeFirst() }
        while let l = s.last, l.isWhitespace { s.removeLast() }
        return String(s)
    }
}
