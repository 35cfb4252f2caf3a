import Foundation

/// A tool run as a child process with its output in a file, bounded in time.
///
/// Spawned with `posix_spawn`, an empty signal mask and default dispositions for the signals a
/// tool relies on: a child started from a Dispatch or cooperative-pool thread otherwise inherits
/// that thread's blocked signals, and SIPp's global `-timeout` (SIGALRM) then never fires.
public enum SpawnedTool {
    /// Runs `tool` with `arguments` in the current folder (or `directory`), standard input from
    /// /dev/null, standard output and error into one log. Returns the exit status (nil when it
    /// had to be killed at `timeout` or died of a signal) and the last `tail` characters of the log.
    public static func run(_ tool: String, _ arguments: [String], timeout: Double, tail: Int = 3000, directory: String? = nil) async -> (status: Int32?, log: String) {
        let logPath = NSTemporaryDirectory() + "spawned-\(UUID().uuidString).log"
        defer { unlink(logPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for sig in [SIGALRM, SIGPIPE, SIGINT, SIGTERM, SIGCHLD] { sigaddset(&defaults, sig) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        // In another folder: through the shell, which changes to it and executes the tool
        // (posix_spawn_file_actions_addchdir_np is not visible from Swift here).
        let program = directory == nil ? tool : "/bin/sh"
        let words = directory.map { ["/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", $0, tool] } ?? [tool]
        let argv = (words + arguments).map { strdup($0) } + [nil]
        defer { for a in argv { free(a) } }
        var pid: pid_t = 0
        guard posix_spawn(&pid, program, &actions, &attributes, argv, environ) == 0 else { return (nil, "cannot start \(tool)") }
        let clock = ContinuousClock(), deadline = clock.now + .milliseconds(Int64(timeout * 1000))
        var status: Int32 = 0
        var exited = false
        while clock.now < deadline {
            if waitpid(pid, &status, WNOHANG) == pid { exited = true; break }
            try? await Task.sleep(for: .milliseconds(20))
        }
        if !exited {
            kill(pid, SIGKILL)
            waitpid(pid, &status, 0)
        }
        let log = (try? String(contentsOfFile: logPath, encoding: .utf8)).map { String($0.suffix(tail)) } ?? ""
        // WIFEXITED / WEXITSTATUS.
        let code: Int32? = exited && (status & 0x7f) == 0 ? (status >> 8) & 0xff : nil
        return (code, log)
    }
}
