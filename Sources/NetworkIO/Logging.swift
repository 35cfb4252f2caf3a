import Logging

extension Logger {
    /// A logger that drops everything: the default of every component's configuration, so the
    /// library logs nothing unless the application hands it a logger (libraries never bootstrap
    /// a logging backend).
    @usableFromInline package static let disabled = Logger(label: "switchboard", factory: { _ in SwiftLogNoOpLogHandler() })
}
