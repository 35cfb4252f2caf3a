/// The built-in scenarios of `-sn`: the project's own XML for SIPp's basic caller and callee
/// (the same message flow as SIPp's `uac` and `uas`, written here, not copied).
public enum SIPpBuiltIn {
    /// The names `-sn` accepts.
    public static let names: Set<String> = ["uac", "uas"]

    /// The XML of a built-in scenario.
    public static func xml(_ name: String) -> String? {
        switch name {
        case "uac": return uac
        case "uas": return uas
        default: return nil
        }
    }

    /// The PCMU description both sides send (the offer of `uac`, the answer of `uas`), indented
    /// as the messages are.
    static let sdp = """
          v=0
          o=switchboard [pid] [call_number] IN IP[media_ip_type] [media_ip]
          s=switchboard
          c=IN IP[media_ip_type] [media_ip]
          t=0 0
          m=audio [media_port] RTP/AVP 0
          a=rtpmap:0 PCMU/8000
    """

    /// A request of the caller to `[service]`: its start line and the headers all of them carry,
    /// `to` as the To line; indented as the messages are.
    static func callerRequest(_ method: String, to: String) -> String {
        """
              \(method) sip:[service]@[remote_ip]:[remote_port] SIP/2.0
              Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
              Max-Forwards: 70
              From: <sip:switchboard@[local_ip]:[local_port]>;tag=sb[pid]-[call_number]
              \(to)
              Call-ID: [call_id]
              CSeq: [cseq] \(method)
              Contact: <sip:switchboard@[local_ip]:[local_port];transport=[transport]>
        """
    }

    /// A response of the callee to the request it last received: the status line, the
    /// request's headers echoed (`to` as the To line) and the callee's Contact.
    static func calleeResponse(_ status: String, to: String) -> String {
        """
              SIP/2.0 \(status)
              [last_Via:]
              [last_From:]
              \(to)
              [last_Call-ID:]
              [last_CSeq:]
              Contact: <sip:[service]@[local_ip]:[local_port];transport=[transport]>
        """
    }

    /// INVITE with an SDP offer (retransmitted over UDP), optional 100/180/183, 200, ACK, the
    /// `-d` pause, BYE, 200.
    static let uac = """
    <?xml version="1.0" encoding="UTF-8"?>
    <!-- Switchboard's basic caller: an INVITE with an SDP offer, ACK, pause (-d), BYE. -->
    <scenario name="Switchboard basic UAC">
      <send retrans="500">
        <![CDATA[
    \(callerRequest("INVITE", to: "To: <sip:[service]@[remote_ip]:[remote_port]>"))
          Subject: switchboard sipp uac
          Content-Type: application/sdp
          Content-Length: [len]

    \(sdp)
        ]]>
      </send>
      <recv response="100" optional="true"/>
      <recv response="180" optional="true"/>
      <recv response="183" optional="true"/>
      <recv response="200" rtd="true"/>
      <send>
        <![CDATA[
    \(callerRequest("ACK", to: "[last_To:]"))
          Content-Length: 0
        ]]>
      </send>
      <pause/>
      <send retrans="500">
        <![CDATA[
    \(callerRequest("BYE", to: "[last_To:]"))
          Content-Length: 0
        ]]>
      </send>
      <recv response="200"/>
    </scenario>
    """

    /// INVITE → 180, 200 with an SDP answer (retransmitted until the ACK), ACK (optional),
    /// BYE → 200.
    static let uas = """
    <?xml version="1.0" encoding="UTF-8"?>
    <!-- Switchboard's basic callee: rings, answers with SDP, waits for the caller's BYE. -->
    <scenario name="Switchboard basic UAS">
      <recv request="INVITE"/>
      <send>
        <![CDATA[
    \(calleeResponse("180 Ringing", to: "[last_To:];tag=sb[pid]-[call_number]"))
          Content-Length: 0
        ]]>
      </send>
      <send retrans="500">
        <![CDATA[
    \(calleeResponse("200 OK", to: "[last_To:];tag=sb[pid]-[call_number]"))
          Content-Type: application/sdp
          Content-Length: [len]

    \(sdp)
        ]]>
      </send>
      <recv request="ACK" optional="true" rtd="true"/>
      <recv request="BYE"/>
      <send>
        <![CDATA[
    \(calleeResponse("200 OK", to: "[last_To:]"))
          Content-Length: 0
        ]]>
      </send>
    </scenario>
    """
}
