import Dispatch
import Synchronization
import NetworkIO

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Standard output written in batches, for a command that prints several lines per call under
/// load (`answer`): once ``start()`` is called, the lines given to ``write(_:)`` gather in a
/// buffer that a thread of its own writes with one `write(2)` every ``interval`` while there is
/// output (however many lines it holds), the buffer at once when it fills, and what is left at
/// exit. A reader still sees each line within about ``interval``. The writers never wait for a
/// system call, nor wake anyone while output flows: the thread parks only after a quiet while,
/// and the first line after that wakes it. The command's lines all go this way (its state
/// lines, `--trace`), so their order is kept.
enum BatchedOutput {
    /// How often the buffer is written while there is output.
    static let interval: UInt32 = 10_000
    /// A buffer this full is written at once.
    static let capacity = 1 << 16
    /// The thread parks after this many empty intervals.
    static let quietIntervals = 20

    private struct Buffer {
        var on = false
        var bytes: [UInt8] = []
        /// Whether the thread waits for ``wake`` (the next line signals it).
        var parked = false
    }

    private static let buffer = Mutex(Buffer())
    private static let wake = DispatchSemaphore(value: 0)

    /// Turns batching on, before the command prints anything (no more than once); what is
    /// left is written at exit. Where the thread cannot start, lines are printed one by one.
    static func start() {
        guard (try? IOThread(name: "stdout", body: run)) != nil else { return }
        buffer.withLock { b in
            b.on = true
            b.bytes.reserveCapacity(capacity)
        }
        atexit { BatchedOutput.flush() }
    }

    /// Buffers `line` (with its newline) when batching is on; false (nothing done) when it is
    /// off and the caller prints the line itself.
    static func write(_ line: UnsafeBufferPointer<UInt8>) -> Bool {
        let state = buffer.withLock { b -> (on: Bool, wake: Bool) in
            guard b.on else { return (false, false) }
            if b.bytes.count + line.count + 1 > capacity { writeOut(&b.bytes) }
            b.bytes.append(contentsOf: line)
            b.bytes.append(0x0A)
            defer { b.parked = false }
            return (true, b.parked)
        }
        if state.wake { wake.signal() }
        return state.on
    }

    /// ``write(_:)`` for a String; prints it when batching is off.
    static func write(_ line: String) {
        var line = line
        if !line.withUTF8({ write($0) }) { print(line) }
    }

    /// Writes what the buffer holds now.
    static func flush() {
        buffer.withLock { writeOut(&$0.bytes) }
    }

    /// The thread: the buffer written every ``interval``; parked after ``quietIntervals``
    /// without output.
    private static func run() {
        var quiet = 0
        while true {
            usleep(interval)
            let park = buffer.withLock { b -> Bool in
                if !b.bytes.isEmpty {
                    writeOut(&b.bytes)
                    quiet = 0
                    return false
                }
                quiet += 1
                guard quiet >= quietIntervals else { return false }
                b.parked = true
                return true
            }
            if park {
                quiet = 0
                wake.wait()
            }
        }
    }

    /// Writes `bytes` to stdout (all of them, unless stdout fails) and empties it; under the
    /// lock, so that batches leave in order.
    private static func writeOut(_ bytes: inout [UInt8]) {
        bytes.withUnsafeBytes { raw in
            var done = 0
            while done < raw.count {
                #if canImport(Glibc)
                let n = Glibc.write(1, raw.baseAddress! + done, raw.count - done)
                #else
                let n = Darwin.write(1, raw.baseAddress! + done, raw.count - done)
                #endif
                if n > 0 { done += n } else if n < 0, errno == EINTR { continue } else { break }
            }
        }
        bytes.removeAll(keepingCapacity: true)
    }
}
