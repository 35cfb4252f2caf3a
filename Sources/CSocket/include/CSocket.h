/*
 * CSocket: thin helpers around the POSIX/Linux socket calls that Swift cannot import
 * (recvmmsg/sendmmsg, accept4, eventfd and pthread_setname_np need _GNU_SOURCE) or that are
 * awkward to call from Swift (sockaddr casts, socket options, inet_pton/inet_ntop).
 *
 * Every function returns -1 and leaves errno set on failure, unless documented otherwise.
 * Part of Switchboard's SIPTransport module; written from the Linux man pages.
 */
#ifndef SWITCHBOARD_CSOCKET_H
#define SWITCHBOARD_CSOCKET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Kinds accepted by cs_socket. */
#define CS_KIND_UDP 0
#define CS_KIND_TCP 1

/* Creates a close-on-exec socket of the given family (AF_INET, AF_INET6) and kind
 * (CS_KIND_UDP, CS_KIND_TCP), non-blocking when `nonblocking` is non-zero. */
int cs_socket(int family, int kind, int nonblocking);

/* Socket options; `on` is 0 or 1. Return 0 on success. */
int cs_set_reuseaddr(int fd, int on);
int cs_set_v6only(int fd, int on);
int cs_set_nodelay(int fd, int on);
int cs_set_nonblocking(int fd, int on);

/* Asks for a receive (send == 0) or send (send != 0) buffer of `requested` bytes. When the
 * limit in /proc/sys/net/core/{r,w}mem_max grants less, tries SO_{RCV,SND}BUFFORCE (which
 * works with CAP_NET_ADMIN). Returns the size the kernel reports afterwards (Linux reports
 * twice the usable size, accounting for its bookkeeping), or -1. */
int cs_set_buffer_size(int fd, int send, int requested);
/* The current receive (send == 0) or send buffer size, as the kernel reports it, or -1. */
int cs_get_buffer_size(int fd, int send);

/* The pending error of a socket (SO_ERROR), 0 when none, or -1 if getsockopt failed. */
int cs_socket_error(int fd);

int cs_bind(int fd, const struct sockaddr_storage *addr, socklen_t len);
int cs_listen(int fd, int backlog);
int cs_connect(int fd, const struct sockaddr_storage *addr, socklen_t len);
int cs_getsockname(int fd, struct sockaddr_storage *addr, socklen_t *len);
int cs_getpeername(int fd, struct sockaddr_storage *addr, socklen_t *len);
/* accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC. */
int cs_accept(int fd, struct sockaddr_storage *addr, socklen_t *len);

/* sendto(2); returns the number of bytes sent or -1. */
ssize_t cs_sendto(int fd, const uint8_t *buf, size_t len, int flags,
                  const struct sockaddr_storage *addr, socklen_t addrlen);
/* send(2) with MSG_NOSIGNAL | MSG_DONTWAIT added (no SIGPIPE, never blocks). */
ssize_t cs_send_stream(int fd, const uint8_t *buf, size_t len);
/* recv(2) with MSG_DONTWAIT added. */
ssize_t cs_recv_stream(int fd, uint8_t *buf, size_t len);

/* Receives up to `count` datagrams with one recvmmsg(2) call. Datagram i is written at
 * buf + i * slot_size; its length goes to lengths[i], its source to addrs[i]/addrlens[i] and
 * its msg_flags (MSG_TRUNC when it did not fit the slot) to msg_flags[i] when msg_flags is not
 * NULL. `flags` are recvmmsg flags (MSG_DONTWAIT, MSG_WAITFORONE). `count` is capped at 256.
 * Returns the number of datagrams received or -1. */
int cs_recv_batch(int fd, uint8_t *buf, size_t slot_size, int count,
                  struct sockaddr_storage *addrs, socklen_t *addrlens, size_t *lengths,
                  int *msg_flags, int flags);

/* Wakes a thread blocked receiving on a datagram socket, for good: shutdown(SHUT_RD), after
 * which a receive returns 0 at once (Linux wakes the waiters and marks the socket even when it
 * is not connected, though the call then reports ENOTCONN, ignored here). Sending still works. */
void cs_shutdown_receive(int fd);

/* Asks the kernel to stamp each received datagram with its arrival time (SO_TIMESTAMPNS,
 * CLOCK_REALTIME); 0 or -1 with errno (ENOPROTOOPT where the option does not exist). */
int cs_enable_receive_timestamps(int fd);

/* Asks the kernel to queue ICMP errors (port/host unreachable…) for datagrams this UDP socket
 * sent (IP_RECVERR, IPV6_RECVERR on an AF_INET6 socket: both, for v4-mapped peers), so that
 * poll reports POLLERR (a blocked receive returns the error's errno) and cs_recv_error reads
 * them. Returns 0 on success. */
int cs_enable_recverr(int fd, int family);
/* Reads one queued error (recvmsg with MSG_ERRQUEUE | MSG_DONTWAIT): the destination of the
 * datagram that caused it in *dest / *destlen, the error (ECONNREFUSED for port unreachable,
 * EHOSTUNREACH, ENETUNREACH…) in *error. Returns 1 when one was read, 0 when the queue is
 * empty, -1 on failure. Errors that did not come from ICMP are read and reported with their
 * errno all the same. */
int cs_recv_error(int fd, struct sockaddr_storage *dest, socklen_t *destlen, int *error);

/* cs_recv_batch with each datagram's kernel arrival time (ns since the Unix epoch,
 * CLOCK_REALTIME) in stamps[i], 0 when the socket gave none. `count` is capped at 256. */
int cs_recv_batch_stamped(int fd, uint8_t *buf, size_t slot_size, int count,
                          struct sockaddr_storage *addrs, socklen_t *addrlens, size_t *lengths,
                          int64_t *stamps, int flags);

/* Sends `count` datagrams (bufs[i], lengths[i]) to (addrs[i], addrlens[i]) with sendmmsg(2),
 * looping until all are sent or one fails. `count` is not capped. Returns the number sent
 * before the first failure (errno tells why when it is less than count), or -1 with errno set
 * when the first one failed. */
int cs_send_batch(int fd, const uint8_t *const *bufs, const size_t *lengths, int count,
                  const struct sockaddr_storage *addrs, const socklen_t *addrlens, int flags);

/* A non-blocking, close-on-exec eventfd used to wake a poll() loop. */
int cs_eventfd(void);
/* Adds one to the eventfd counter (wakes poll()); returns 0 or -1. */
int cs_eventfd_signal(int fd);
/* Resets the eventfd counter to zero; returns 0 or -1. */
int cs_eventfd_drain(int fd);

/* A socket that becomes readable when the host's IP addresses change: Linux NETLINK_ROUTE
 * subscribed to the IPv4 and IPv6 address groups (RTM_NEWADDR, RTM_DELADDR), non-blocking and
 * close-on-exec. -1 with errno set on failure, and ENOSYS elsewhere than Linux. */
int cs_address_watch_open(void);
/* Reads and discards whatever is pending on `fd` (a non-blocking socket); returns the number of
 * datagrams read, or -1 with errno when the first read failed with something else than EAGAIN. */
int cs_drain_datagrams(int fd);
/* The host's IP addresses (interfaces that are up), one per line as "NAME ADDRESS FLAGS" (FLAGS:
 * "l" loopback, "k" IPv6 link-local, "-" neither), written into `out` (at most `size` bytes,
 * NUL-terminated, whole lines only). Returns the number of addresses written, or -1 with errno. */
int cs_local_addresses(char *out, size_t size);

/* An epoll instance (close-on-exec), or -1. Linux only; elsewhere -1 with errno ENOSYS. */
int cs_epoll_create(void);
/* Watches `fd` for input (level-triggered) with `tag` handed back by cs_epoll_wait. 0 or -1. */
int cs_epoll_add(int ep, int fd, uint64_t tag);
/* Stops watching `fd`. 0 or -1. */
int cs_epoll_remove(int ep, int fd);
/* Waits up to `timeout_ms` (-1: forever) for at most `max` ready descriptors (capped at 512)
 * and writes their tags; returns how many (0 on timeout or EINTR) or -1. */
int cs_epoll_wait(int ep, uint64_t *tags, int max, int timeout_ms);

/* A non-blocking, close-on-exec CLOCK_MONOTONIC timerfd, or -1 (ENOSYS off Linux). */
int cs_timerfd_create(void);
/* Arms the timer to fire once at the absolute CLOCK_MONOTONIC time seconds + nanoseconds
 * (a time in the past fires at once); seconds < 0 disarms it. 0 or -1. */
int cs_timerfd_arm(int fd, int64_t seconds, int64_t nanoseconds);

/* Parses a numeric IPv4 or IPv6 address (no brackets; an IPv6 address may end in %scope, an
 * interface name or number) into `out`, with `port`. Returns AF_INET or AF_INET6, or -1
 * (errno EINVAL) when the text is not a numeric address. */
int cs_sockaddr_from_text(const char *ip, uint16_t port, struct sockaddr_storage *out,
                          socklen_t *outlen);

/* Builds a sockaddr from raw address bytes in network order (4 bytes for AF_INET, 16 for
 * AF_INET6) and a port in host order. Returns 0 or -1 (errno EAFNOSUPPORT). */
int cs_sockaddr_make(int family, const uint8_t *address, uint16_t port, uint32_t scope_id,
                     struct sockaddr_storage *out, socklen_t *outlen);

/* Splits a sockaddr into its family (returned; -1 when neither IPv4 nor IPv6), raw address
 * bytes (4 or 16 written to address16), port (host order) and IPv6 scope id (0 for IPv4). */
int cs_sockaddr_parts(const struct sockaddr_storage *addr, socklen_t len, uint8_t *address16,
                      uint16_t *port, uint32_t *scope_id);

/* Writes the text form of raw address bytes (inet_ntop) into buf. Returns 0 or -1. */
int cs_address_to_text(int family, const uint8_t *address, char *buf, size_t buflen);

/* Writes strerror's text for `err` into buf (always NUL-terminated). */
void cs_strerror(int err, char *buf, size_t buflen);

/* The calling thread's errno. */
int cs_errno(void);

/* Puts the calling thread in SCHED_FIFO at `priority` (1-99). Returns 0 or an errno value
 * (EPERM without CAP_SYS_NICE or an RLIMIT_RTPRIO allowance). */
int cs_set_thread_realtime(int priority);

/* Names the calling thread (at most 15 bytes are kept). */
void cs_set_thread_name(const char *name);

/// Makes standard output line-buffered (setvbuf _IOLBF), so that a command's output reaches a
/// file or pipe line by line even when the process is killed.
void cs_stdout_line_buffered(void);

#ifdef __cplusplus
}
#endif

#endif
