import ServiceLifecycle
import SIPDialog

/// A phone in a swift-service-lifecycle `ServiceGroup`: it runs until the group shuts down
/// gracefully (SIGTERM, SIGINT, or another service ending), then ends its calls, removes its
/// registration and closes — what ``shutdown(timeout:)`` does.
///
/// ```swift
/// let phone = try Phone(name: "reception", configuration: configuration)
/// let group = ServiceGroup(configuration: .init(services: [phone], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
/// try await group.run()
/// ```
extension Phone: Service {
    /// Waits for the graceful shutdown (or the task's cancellation), then ``shutdown(timeout:)``.
    public func run() async throws {
        // Returns when the shutdown starts; throws when the task is cancelled instead.
        try? await gracefulShutdown()
        // Not cancelled with the caller: the BYEs must still leave and be answered.
        await Task { await self.shutdown() }.value
    }

    /// Ends the phone: every call ends (BYE when up, CANCEL while ours rings, a decline for an
    /// incoming one not answered), each bounded by `timeout`; every account's registration, if any, is
    /// removed (REGISTER with `Expires: 0`); then the sockets close. Calling it again does nothing
    /// more than ``close()``.
    public func shutdown(timeout: Duration = .seconds(5)) async {
        let live = calls
        await withTaskGroup(of: Void.self) { group in
            for call in live { group.addTask { await call.hangUp(declineWith: 480, timeout: timeout) } }
        }
        await withTaskGroup(of: Void.self) { group in
            for account in accounts { group.addTask { await account.unregister(timeout: timeout) } }
        }
        close()
    }
}
