/*
 * malloc_count.c - LD_PRELOAD allocation counter for the Switchboard
 * parser benchmarks.
 *
 * Interposes the allocating entry points of the C allocator and counts
 * every call (thread-safe, relaxed atomic increment), then forwards to
 * glibc's own implementation through the exported __libc_* aliases. Using
 * those aliases instead of dlsym(RTLD_NEXT, ...) avoids the bootstrap
 * problem where dlsym itself calls calloc before the real symbol is known.
 *
 * Counted: malloc, calloc, realloc, posix_memalign, aligned_alloc,
 * memalign. Every call counts as one, including realloc(p, 0) and
 * realloc that shrinks in place. free() is not interposed; memory from
 * all of the above is released by glibc's free as usual.
 *
 * Programs query the counter without linking against this library:
 *
 *     unsigned long long (*count)(void) =
 *         dlsym(RTLD_DEFAULT, "sb_malloc_count");
 *     if (count) { before = count(); ...; after = count(); }
 *
 * Build:  gcc -O2 -shared -fPIC -o libmalloc_count.so malloc_count.c
 * Use:    LD_PRELOAD=/path/libmalloc_count.so ./program
 *
 * A process that cannot be asked (a server under load) reports its count on
 * demand instead: with SB_MALLOC_COUNT_FILE=path in its environment, each
 * SIGURG writes the current count, in decimal and a newline, to that file
 * (scripts/bench-cpu reads it before and after a run: allocations per call).
 *
 * glibc only (relies on __libc_malloc & co., exported since glibc 2.0).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t nmemb, size_t size);
extern void *__libc_realloc(void *ptr, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);

#define SB_EXPORT __attribute__((visibility("default")))

static unsigned long long sb_count;

static inline void sb_bump(void)
{
	__atomic_fetch_add(&sb_count, 1ULL, __ATOMIC_RELAXED);
}

SB_EXPORT unsigned long long sb_malloc_count(void)
{
	return __atomic_load_n(&sb_count, __ATOMIC_RELAXED);
}

static char sb_report_path[4096];

/* Async-signal-safe: open, write and close only, the number formatted by hand. */
static void sb_report(int sig)
{
	(void)sig;
	int saved = errno;
	char buf[32];
	int n = 0;
	unsigned long long v = __atomic_load_n(&sb_count, __ATOMIC_RELAXED);
	char tmp[24];
	int t = 0;
	do {
		tmp[t++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	while (t > 0)
		buf[n++] = tmp[--t];
	buf[n++] = '\n';
	int fd = open(sb_report_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0) {
		ssize_t w = write(fd, buf, (size_t)n);
		(void)w;
		close(fd);
	}
	errno = saved;
}

__attribute__((constructor)) static void sb_install_report(void)
{
	const char *path = getenv("SB_MALLOC_COUNT_FILE");
	if (path == NULL || path[0] == '\0' || strlen(path) >= sizeof(sb_report_path))
		return;
	memcpy(sb_report_path, path, strlen(path) + 1);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = sb_report;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGURG, &sa, NULL);
}

SB_EXPORT void *malloc(size_t size)
{
	sb_bump();
	return __libc_malloc(size);
}

SB_EXPORT void *calloc(size_t nmemb, size_t size)
{
	sb_bump();
	return __libc_calloc(nmemb, size);
}

SB_EXPORT void *realloc(void *ptr, size_t size)
{
	sb_bump();
	return __libc_realloc(ptr, size);
}

SB_EXPORT void *memalign(size_t alignment, size_t size)
{
	sb_bump();
	return __libc_memalign(alignment, size);
}

SB_EXPORT void *aligned_alloc(size_t alignment, size_t size)
{
	sb_bump();
	/* glibc's aligned_alloc rejects non-power-of-two alignments. */
	if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
		errno = EINVAL;
		return NULL;
	}
	return __libc_memalign(alignment, size);
}

SB_EXPORT int posix_memalign(void **memptr, size_t alignment, size_t size)
{
	void *p;

	sb_bump();
	if (alignment == 0 || (alignment & (alignment - 1)) != 0 ||
	    alignment % sizeof(void *) != 0)
		return EINVAL;

	/* posix_memalign must not modify errno on success. */
	int saved = errno;
	p = __libc_memalign(alignment, size);
	if (p == NULL) {
		errno = saved;
		return ENOMEM;
	}
	errno = saved;
	*memptr = p;
	return 0;
}
