import SIPMessage

/// One action on a call, for ``Phone/perform(_:)``: CallKit's `CXAction`s (start, answer, end,
/// hold, mute, play DTMF) and the transfer and forward actions of the other SDKs.
public enum CallAction: Sendable {
    /// ``Call/answer(timeout:)``.
    case answer(Call)
    /// ``Call/reject(_:reason:)`` with this status.
    case reject(Call, status: Int)
    /// ``Call/hangUp(declineWith:timeout:)`` (never fails).
    case hangUp(Call)
    /// ``Call/setHeld(_:timeout:)``.
    case setHeld(Call, Bool)
    /// ``Call/setMuted(_:)`` (never fails).
    case setMuted(Call, Bool)
    /// ``Call/sendDigits(_:)``.
    case sendDigits(Call, String)
    /// ``Call/transfer(to:notifyTimeout:)``; fails with ``CallError/transferFailed(_:)`` unless
    /// the transfer succeeded.
    case transfer(Call, to: SIPURI)
    /// ``Call/attendedTransfer(to:notifyTimeout:)`` to the second call; fails unless it succeeded.
    case attendedTransfer(Call, to: Call)
    /// ``Call/forward(to:statusCode:timeout:)``.
    case forward(Call, to: [SIPURI])

    /// The call the action is on.
    public var call: Call {
        switch self {
        case .answer(let c), .reject(let c, _), .hangUp(let c), .setHeld(let c, _), .setMuted(let c, _), .sendDigits(let c, _),
             .transfer(let c, _), .attendedTransfer(let c, _), .forward(let c, _):
            return c
        }
    }
}

extension Phone {
    /// Performs a batch of actions in order, each one completing (or failing) before the next
    /// starts, and reports each one's result — CallKit's `CXTransaction`, where the system asks
    /// for several actions at once (end one call and answer another, hold one and start a new
    /// one). A failed action does not stop the ones after it.
    public func perform(_ actions: [CallAction]) async -> [Result<Void, CallError>] {
        var results: [Result<Void, CallError>] = []
        results.reserveCapacity(actions.count)
        for action in actions {
            do throws(CallError) {
                guard action.call.phone === self else { throw .invalidArgument("the call belongs to another phone") }
                try await Self.run(action)
                results.append(.success(()))
            } catch {
                results.append(.failure(error))
            }
        }
        return results
    }

    private static func run(_ action: CallAction) async throws(CallError) {
        switch action {
        case .answer(let c): try await c.answer()
        case .reject(let c, let status): try await c.reject(status)
        case .hangUp(let c): await c.hangUp()
        case .setHeld(let c, let held): try await c.setHeld(held)
        case .setMuted(let c, let muted): c.setMuted(muted)
        case .sendDigits(let c, let digits): try await c.sendDigits(digits)
        case .transfer(let c, let target):
            let outcome = try await c.transfer(to: target)
            if !outcome.isSuccess { throw .transferFailed(outcome) }
        case .attendedTransfer(let c, let other):
            let outcome = try await c.attendedTransfer(to: other)
            if !outcome.isSuccess { throw .transferFailed(outcome) }
        case .forward(let c, let targets): try await c.forward(to: targets)
        }
    }
}
