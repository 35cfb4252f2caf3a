// Preloaded into a server run under valgrind by scripts/bench-callgrind. Valgrind 3.19's
// wrapper for rt_sigsuspend writes to the signal mask it is given; libdispatch's dispatch_main
// passes a mask in read-only memory (a static const), so valgrind itself crashes when the main
// thread parks there. This sigsuspend hands the kernel a writable copy instead.
#define _GNU_SOURCE
#include <signal.h>
#include <unistd.h>
#include <sys/syscall.h>

int sigsuspend(const sigset_t *mask) {
    sigset_t copy = *mask;
    return (int)syscall(SYS_rt_sigsuspend, &copy, (size_t)(_NSIG / 8));
}
