import CSocket

/// A system call that failed: its name, `errno` and the `strerror` text.
public struct SystemCallError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The failing call (`"bind"`, `"sendto"`, `"recvmmsg"`, …).
    public let call: String
    /// The `errno` value the call left.
    public let code: Int32
    /// `strerror(code)`, captured when the error was made.
    public let message: String

    /// Creates an error for `call` with an explicit errno value.
    public init(call: String, code: Int32) {
        self.call = call
        self.code = code
        var buffer = [CChar](repeating: 0, count: 256)
        buffer.withUnsafeMutableBufferPointer { cs_strerror(code, $0.baseAddress, $0.count) }
        let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        self.message = String(decoding: bytes, as: UTF8.self)
    }

    /// The error for `call` from the calling thread's current `errno`.
    package static func current(_ call: String) -> SystemCallError {
        SystemCallError(call: call, code: cs_errno())
    }

    /// `call: message (errno code)`.
    public var description: String { "\(call): \(message) (errno \(code))" }
}
