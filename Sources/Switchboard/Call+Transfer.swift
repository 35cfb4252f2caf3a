import SIPMessage
import SIPDialog

extension Call {
    // MARK: Transfer and forward

    /// Transfers the call to `target` (blind transfer, RFC 5589 §6): a REFER in this call's
    /// dialog, after which the peer calls `target` itself. Returns when the outcome is known —
    /// success only on the peer's final NOTIFY with a 2xx, never on the 202 — and on success
    /// hangs the call up, which then ends with ``CallEndReason/transferred(to:)``. Any other
    /// outcome leaves the call as it was, ours to take back.
    ///
    /// Only on an established call (held or not); otherwise throws
    /// ``CallError/invalidState(action:state:)``.
    ///
    /// - Parameters:
    ///   - target: whom the peer is to call (the `Refer-To`).
    ///   - notifyTimeout: how long to wait for the peer's next NOTIFY before the outcome is
    ///     `ReferOutcome.unknown`.
    public func transfer(to target: SIPURI, notifyTimeout: Duration = .seconds(32)) async throws(CallError) -> ReferOutcome {
        guard state.isEstablished else { throw .invalidState(action: "transfer", state: state) }
        return await phone.transfer(key, to: target, notifyTimeout: notifyTimeout)
    }

    /// Blind transfer with the REFER sent *outside* this call's dialog (RFC 4538): it goes to
    /// the peer's Contact with a `Target-Dialog` naming this call, by which the peer authorizes
    /// it; its subscription (the NOTIFYs) lives in the new dialog its 202 creates. Otherwise as
    /// ``transfer(to:notifyTimeout:)``: the outcome from the final NOTIFY, the call hung up on
    /// success. With ``Phone/TargetDialogUse/whenSupported`` a peer that did not list `tdialog`
    /// gets the usual in-dialog REFER.
    public func transfer(to target: SIPURI, targetDialog use: Phone.TargetDialogUse,
                         notifyTimeout: Duration = .seconds(32)) async throws(CallError) -> ReferOutcome {
        guard state.isEstablished else { throw .invalidState(action: "transfer", state: state) }
        return await phone.transfer(key, to: target, targetDialog: use, notifyTimeout: notifyTimeout)
    }

    /// Attended transfer (RFC 5589 §7): this call's peer is asked to call the party of
    /// `other` (our consultation call) with `Replaces` naming that call, so the new call takes
    /// its place at the target. Returns when the outcome is known; on success this call is hung
    /// up (``CallEndReason/transferred(to:)``) and the target ends `other` itself.
    ///
    /// This call must be established. `other` must be a call of the same phone, established, or
    /// still ringing: ringing at the target (our outgoing call, ``CallState/ringing(earlyMedia:)``)
    /// or ringing here (an incoming call we sent 180 for, ``IncomingPhase/ringing``). RFC 3891
    /// lets a target replace an early dialog only when the target placed it, so a consultation
    /// that still rings at the target is usually refused there (481: the outcome is
    /// `ReferOutcome.failed`); it is sent all the same, for the targets that accept it.
    public func attendedTransfer(to other: Call, notifyTimeout: Duration = .seconds(32)) async throws(CallError) -> ReferOutcome {
        guard other !== self, other.phone === phone else {
            throw .invalidArgument("the consultation call must be another call of the same phone")
        }
        guard state.isEstablished else { throw .invalidState(action: "transfer", state: state) }
        guard other.canBeReplacementTarget else { throw .invalidState(action: "transfer to a consultation call", state: other.state) }
        return await phone.transfer(key, replacing: other.key, notifyTimeout: notifyTimeout)
    }

    /// Whether a call can be the consultation call of an attended transfer: established, or
    /// ringing with a dialog (ours at the target, or theirs here after our 18x).
    var canBeReplacementTarget: Bool {
        switch state {
        case .established: return true
        case .ringing: return direction == .outgoing
        case .incoming(.ringing): return direction == .incoming
        default: return false
        }
    }

    /// Forwards an incoming call that is not answered yet (call forwarding, libSoftphone's
    /// `forward`): a 3xx listing `targets` as Contacts, the first preferred (see
    /// ``Phone/forward(_:to:statusCode:reason:expires:history:)``). Returns once the call ended with
    /// ``CallEndReason/forwarded(to:)`` (libSoftphone's `IncomingForwarded`).
    ///
    /// Throws ``CallError/invalidState(action:state:)`` unless the call is incoming and not
    /// answered (``CallState/incoming(_:)``), ``CallError/invalidArgument(_:)`` without a
    /// target, ``CallError/ended(_:)`` when the caller gave up first, and
    /// ``CallError/session(_:)`` when the response could not be sent.
    public func forward(to targets: [SIPURI], statusCode: Int = 302, timeout: Duration = .seconds(5)) async throws(CallError) {
        guard direction == .incoming, case .incoming = state else { throw .invalidState(action: "forward", state: state) }
        guard !targets.isEmpty else { throw .invalidArgument("a forward needs at least one target") }
        guard (300..<400).contains(statusCode) else { throw .invalidArgument("a forward is a 3xx, not \(statusCode)") }
        do throws(SessionError) {
            try await phone.forwardCall(key, to: targets, statusCode: statusCode)
        } catch {
            if case .ended(let reason) = state { throw .ended(reason) }
            throw .session(error)
        }
        let expected = CallState.ended(.forwarded(to: Array(targets.prefix(10))))
        try await waitUntil("forward", timeout: timeout) { $0 == expected }
    }
}
