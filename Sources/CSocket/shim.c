/* CSocket: see include/CSocket.h. _GNU_SOURCE must come before every include so that
 * recvmmsg, sendmmsg, accept4, SO_RCVBUFFORCE and pthread_setname_np are declared. */
#define _GNU_SOURCE 1

#include "CSocket.h"
#include <stdio.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#ifdef __linux__
#include <sys/epoll.h>
#include <sys/timerfd.h>
#endif
#include <sys/uio.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <unistd.h>
#include <ifaddrs.h>
#ifdef __linux__
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#endif

#define CS_MAX_BATCH 256

int cs_socket(int family, int kind, int nonblocking) {
    int type = (kind == CS_KIND_TCP ? SOCK_STREAM : SOCK_DGRAM) | SOCK_CLOEXEC;
    if (nonblocking) type |= SOCK_NONBLOCK;
    int protocol = kind == CS_KIND_TCP ? IPPROTO_TCP : IPPROTO_UDP;
    return socket(family, type, protocol);
}

static int set_int_option(int fd, int level, int name, int value) {
    return setsockopt(fd, level, name, &value, sizeof value);
}

int cs_set_reuseaddr(int fd, int on) { return set_int_option(fd, SOL_SOCKET, SO_REUSEADDR, on ? 1 : 0); }
int cs_set_v6only(int fd, int on) { return set_int_option(fd, IPPROTO_IPV6, IPV6_V6ONLY, on ? 1 : 0); }
int cs_set_nodelay(int fd, int on) { return set_int_option(fd, IPPROTO_TCP, TCP_NODELAY, on ? 1 : 0); }

int cs_set_nonblocking(int fd, int on) {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0) return -1;
    flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
    return fcntl(fd, F_SETFL, flags);
}

int cs_get_buffer_size(int fd, int send) {
    int value = 0;
    socklen_t len = sizeof value;
    if (getsockopt(fd, SOL_SOCKET, send ? SO_SNDBUF : SO_RCVBUF, &value, &len) < 0) return -1;
    return value;
}

int cs_set_buffer_size(int fd, int send, int requested) {
    if (requested <= 0) return cs_get_buffer_size(fd, send);
    if (set_int_option(fd, SOL_SOCKET, send ? SO_SNDBUF : SO_RCVBUF, requested) < 0) return -1;
    int effective = cs_get_buffer_size(fd, send);
    if (effective >= 0 && effective / 2 < requested) {
        /* Capped by {r,w}mem_max: the FORCE variants ignore the cap with CAP_NET_ADMIN. A
         * failure (EPERM) is not an error; the capped size stands. */
        int saved = errno;
        if (set_int_option(fd, SOL_SOCKET, send ? SO_SNDBUFFORCE : SO_RCVBUFFORCE, requested) == 0)
            effective = cs_get_buffer_size(fd, send);
        errno = saved;
    }
    return effective;
}

int cs_socket_error(int fd) {
    int value = 0;
    socklen_t len = sizeof value;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &value, &len) < 0) return -1;
    return value;
}

int cs_bind(int fd, const struct sockaddr_storage *addr, socklen_t len) {
    return bind(fd, (const struct sockaddr *)addr, len);
}

int cs_listen(int fd, int backlog) { return listen(fd, backlog); }

int cs_connect(int fd, const struct sockaddr_storage *addr, socklen_t len) {
    return connect(fd, (const struct sockaddr *)addr, len);
}

int cs_getsockname(int fd, struct sockaddr_storage *addr, socklen_t *len) {
    *len = sizeof *addr;
    return getsockname(fd, (struct sockaddr *)addr, len);
}

int cs_getpeername(int fd, struct sockaddr_storage *addr, socklen_t *len) {
    *len = sizeof *addr;
    return getpeername(fd, (struct sockaddr *)addr, len);
}

int cs_accept(int fd, struct sockaddr_storage *addr, socklen_t *len) {
    *len = sizeof *addr;
    return accept4(fd, (struct sockaddr *)addr, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

ssize_t cs_sendto(int fd, const uint8_t *buf, size_t len, int flags,
                  const struct sockaddr_storage *addr, socklen_t addrlen) {
    return sendto(fd, buf, len, flags, (const struct sockaddr *)addr, addrlen);
}

ssize_t cs_send_stream(int fd, const uint8_t *buf, size_t len) {
    return send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

ssize_t cs_recv_stream(int fd, uint8_t *buf, size_t len) {
    return recv(fd, buf, len, MSG_DONTWAIT);
}

/* recvmmsg into fixed slots; msg_flags and stamps (SCM_TIMESTAMPNS, 0 when absent) are
 * optional outputs. */
static int recv_batch(int fd, uint8_t *buf, size_t slot_size, int count,
                      struct sockaddr_storage *addrs, socklen_t *addrlens, size_t *lengths,
                      int *msg_flags, int64_t *stamps, int flags) {
    if (count <= 0) return 0;
    if (count > CS_MAX_BATCH) count = CS_MAX_BATCH;
    struct mmsghdr msgs[CS_MAX_BATCH];
    struct iovec iovs[CS_MAX_BATCH];
    union {
        char buf[CMSG_SPACE(sizeof(struct timespec))];
        struct cmsghdr align;
    } control[CS_MAX_BATCH];
    memset(msgs, 0, sizeof(struct mmsghdr) * (size_t)count);
    for (int i = 0; i < count; i++) {
        iovs[i].iov_base = buf + (size_t)i * slot_size;
        iovs[i].iov_len = slot_size;
        msgs[i].msg_hdr.msg_iov = &iovs[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_name = &addrs[i];
        msgs[i].msg_hdr.msg_namelen = sizeof(struct sockaddr_storage);
        if (stamps) {
            msgs[i].msg_hdr.msg_control = control[i].buf;
            msgs[i].msg_hdr.msg_controllen = sizeof control[i].buf;
        }
    }
    int n;
    do {
        n = recvmmsg(fd, msgs, (unsigned int)count, flags, NULL);
    } while (n < 0 && errno == EINTR);
    for (int i = 0; i < n; i++) {
        lengths[i] = msgs[i].msg_len;
        addrlens[i] = msgs[i].msg_hdr.msg_namelen;
        if (msg_flags) msg_flags[i] = msgs[i].msg_hdr.msg_flags;
        if (!stamps) continue;
        stamps[i] = 0;
#ifdef SCM_TIMESTAMPNS
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); c; c = CMSG_NXTHDR(&msgs[i].msg_hdr, c)) {
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS && c->cmsg_len >= CMSG_LEN(sizeof(struct timespec))) {
                struct timespec ts;
                memcpy(&ts, CMSG_DATA(c), sizeof ts);
                stamps[i] = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
            }
        }
#endif
    }
    return n;
}

int cs_recv_batch(int fd, uint8_t *buf, size_t slot_size, int count,
                  struct sockaddr_storage *addrs, socklen_t *addrlens, size_t *lengths,
                  int *msg_flags, int flags) {
    return recv_batch(fd, buf, slot_size, count, addrs, addrlens, lengths, msg_flags, NULL, flags);
}

void cs_shutdown_receive(int fd) {
    (void)shutdown(fd, SHUT_RD);
}

int cs_enable_receive_timestamps(int fd) {
#ifdef SO_TIMESTAMPNS
    int on = 1;
    return setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on);
#else
    (void)fd;
    errno = ENOPROTOOPT;
    return -1;
#endif
}

int cs_recv_batch_stamped(int fd, uint8_t *buf, size_t slot_size, int count,
                          struct sockaddr_storage *addrs, socklen_t *addrlens, size_t *lengths,
                          int64_t *stamps, int flags) {
    return recv_batch(fd, buf, slot_size, count, addrs, addrlens, lengths, NULL, stamps, flags);
}

int cs_send_batch(int fd, const uint8_t *const *bufs, const size_t *lengths, int count,
                  const struct sockaddr_storage *addrs, const socklen_t *addrlens, int flags) {
    struct mmsghdr msgs[64];
    struct iovec iovs[64];
    int sent = 0;
    while (sent < count) {
        int chunk = count - sent;
        if (chunk > 64) chunk = 64;
        memset(msgs, 0, sizeof(struct mmsghdr) * (size_t)chunk);
        for (int i = 0; i < chunk; i++) {
            int k = sent + i;
            iovs[i].iov_base = (void *)bufs[k];
            iovs[i].iov_len = lengths[k];
            msgs[i].msg_hdr.msg_iov = &iovs[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
            msgs[i].msg_hdr.msg_name = (void *)&addrs[k];
            msgs[i].msg_hdr.msg_namelen = addrlens[k];
        }
        int n, refused = 0;
        do {
            n = sendmmsg(fd, msgs, (unsigned int)chunk, flags);
            /* With IP_RECVERR an ICMP error for an earlier datagram is also left pending on the
             * socket and fails the next send: that error is not this batch's. Each ICMP error
             * arriving meanwhile, and each read from the error queue while more are queued,
             * arms it again: retry, bounded. */
        } while (n < 0 && (errno == EINTR || (errno == ECONNREFUSED && refused++ < 256)));
        if (n < 0) return sent == 0 ? -1 : sent;
        sent += n;
        if (n < chunk) {
            /* sendmmsg stops early on an error it reports on the next call: find it. */
            ssize_t r;
            do {
                r = sendto(fd, bufs[sent], lengths[sent], flags,
                           (const struct sockaddr *)&addrs[sent], addrlens[sent]);
            } while (r < 0 && errno == EINTR);
            if (r < 0) return sent == 0 ? -1 : sent;
            sent += 1;
        }
    }
    return sent;
}

int cs_eventfd(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

int cs_eventfd_signal(int fd) {
    uint64_t one = 1;
    ssize_t r;
    do {
        r = write(fd, &one, sizeof one);
    } while (r < 0 && errno == EINTR);
    /* EAGAIN means the counter is saturated: the reader is already woken. */
    return (r == (ssize_t)sizeof one || (r < 0 && errno == EAGAIN)) ? 0 : -1;
}

int cs_eventfd_drain(int fd) {
    uint64_t value;
    ssize_t r;
    do {
        r = read(fd, &value, sizeof value);
    } while (r < 0 && errno == EINTR);
    return (r == (ssize_t)sizeof value || (r < 0 && errno == EAGAIN)) ? 0 : -1;
}

#ifdef __linux__
int cs_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int cs_epoll_add(int ep, int fd, uint64_t tag) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN;
    ev.data.u64 = tag;
    return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

int cs_epoll_remove(int ep, int fd) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    return epoll_ctl(ep, EPOLL_CTL_DEL, fd, &ev);
}

#define CS_MAX_EPOLL 512
int cs_epoll_wait(int ep, uint64_t *tags, int max, int timeout_ms) {
    struct epoll_event events[CS_MAX_EPOLL];
    if (max > CS_MAX_EPOLL) max = CS_MAX_EPOLL;
    if (max <= 0) return 0;
    int n = epoll_wait(ep, events, max, timeout_ms);
    if (n < 0) return errno == EINTR ? 0 : -1;
    for (int i = 0; i < n; i++) tags[i] = events[i].data.u64;
    return n;
}

int cs_timerfd_create(void) { return timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC); }

int cs_timerfd_arm(int fd, int64_t seconds, int64_t nanoseconds) {
    struct itimerspec spec;
    memset(&spec, 0, sizeof spec);
    if (seconds >= 0) {
        spec.it_value.tv_sec = (time_t)seconds;
        spec.it_value.tv_nsec = (long)nanoseconds;
        /* An all-zero it_value disarms: the earliest representable time instead. */
        if (seconds == 0 && nanoseconds == 0) spec.it_value.tv_nsec = 1;
    }
    return timerfd_settime(fd, TFD_TIMER_ABSTIME, &spec, NULL);
}
#else
int cs_epoll_create(void) { errno = ENOSYS; return -1; }
int cs_epoll_add(int ep, int fd, uint64_t tag) { (void)ep; (void)fd; (void)tag; errno = ENOSYS; return -1; }
int cs_epoll_remove(int ep, int fd) { (void)ep; (void)fd; errno = ENOSYS; return -1; }
int cs_epoll_wait(int ep, uint64_t *tags, int max, int timeout_ms) { (void)ep; (void)tags; (void)max; (void)timeout_ms; errno = ENOSYS; return -1; }
int cs_timerfd_create(void) { errno = ENOSYS; return -1; }
int cs_timerfd_arm(int fd, int64_t seconds, int64_t nanoseconds) { (void)fd; (void)seconds; (void)nanoseconds; errno = ENOSYS; return -1; }
#endif

int cs_sockaddr_from_text(const char *ip, uint16_t port, struct sockaddr_storage *out,
                          socklen_t *outlen) {
    memset(out, 0, sizeof *out);
    struct sockaddr_in *v4 = (struct sockaddr_in *)out;
    if (inet_pton(AF_INET, ip, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        *outlen = sizeof *v4;
        return AF_INET;
    }
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)out;
    char text[INET6_ADDRSTRLEN + IF_NAMESIZE + 2];
    size_t n = strlen(ip);
    if (n >= sizeof text) { errno = EINVAL; return -1; }
    memcpy(text, ip, n + 1);
    uint32_t scope = 0;
    char *percent = strchr(text, '%');
    if (percent) {
        *percent = 0;
        const char *zone = percent + 1;
        if (*zone == 0) { errno = EINVAL; return -1; }
        char *end = NULL;
        unsigned long number = strtoul(zone, &end, 10);
        if (*end == 0 && zone[0] >= '0' && zone[0] <= '9') {
            if (number > UINT32_MAX) { errno = EINVAL; return -1; }
            scope = (uint32_t)number;
        } else {
            scope = if_nametoindex(zone);
            if (scope == 0) { errno = EINVAL; return -1; }
        }
    }
    if (inet_pton(AF_INET6, text, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        v6->sin6_scope_id = scope;
        *outlen = sizeof *v6;
        return AF_INET6;
    }
    memset(out, 0, sizeof *out);
    errno = EINVAL;
    return -1;
}

int cs_sockaddr_make(int family, const uint8_t *address, uint16_t port, uint32_t scope_id,
                     struct sockaddr_storage *out, socklen_t *outlen) {
    memset(out, 0, sizeof *out);
    if (family == AF_INET) {
        struct sockaddr_in *v4 = (struct sockaddr_in *)out;
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        memcpy(&v4->sin_addr, address, 4);
        *outlen = sizeof *v4;
        return 0;
    }
    if (family == AF_INET6) {
        struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)out;
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        v6->sin6_scope_id = scope_id;
        memcpy(&v6->sin6_addr, address, 16);
        *outlen = sizeof *v6;
        return 0;
    }
    errno = EAFNOSUPPORT;
    return -1;
}

int cs_sockaddr_parts(const struct sockaddr_storage *addr, socklen_t len, uint8_t *address16,
                      uint16_t *port, uint32_t *scope_id) {
    if (addr->ss_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)addr;
        memcpy(address16, &v4->sin_addr, 4);
        *port = ntohs(v4->sin_port);
        *scope_id = 0;
        return AF_INET;
    }
    if (addr->ss_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)addr;
        memcpy(address16, &v6->sin6_addr, 16);
        *port = ntohs(v6->sin6_port);
        *scope_id = v6->sin6_scope_id;
        return AF_INET6;
    }
    errno = EAFNOSUPPORT;
    return -1;
}

int cs_address_to_text(int family, const uint8_t *address, char *buf, size_t buflen) {
    return inet_ntop(family, address, buf, (socklen_t)buflen) ? 0 : -1;
}

void cs_strerror(int err, char *buf, size_t buflen) {
    if (buflen == 0) return;
    /* The GNU strerror_r returns a pointer that may or may not be buf. */
    const char *text = strerror_r(err, buf, buflen);
    if (text != buf) {
        strncpy(buf, text, buflen - 1);
        buf[buflen - 1] = 0;
    }
}

int cs_errno(void) { return errno; }

int cs_set_thread_realtime(int priority) {
    struct sched_param param;
    memset(&param, 0, sizeof param);
    param.sched_priority = priority;
    return pthread_setschedparam(pthread_self(), SCHED_FIFO, &param);
}

void cs_set_thread_name(const char *name) {
    char shortened[16];
    strncpy(shortened, name, sizeof shortened - 1);
    shortened[sizeof shortened - 1] = 0;
    pthread_setname_np(pthread_self(), shortened);
}

void cs_stdout_line_buffered(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
}

int cs_enable_recverr(int fd, int family) {
    int on = 1;
    if (family == AF_INET6) {
        if (setsockopt(fd, IPPROTO_IPV6, IPV6_RECVERR, &on, sizeof on) != 0) return -1;
        /* A dual-stack socket also hears about its IPv4 peers this way; failure is harmless. */
        (void)setsockopt(fd, IPPROTO_IP, IP_RECVERR, &on, sizeof on);
        return 0;
    }
    return setsockopt(fd, IPPROTO_IP, IP_RECVERR, &on, sizeof on);
}

int cs_recv_error(int fd, struct sockaddr_storage *dest, socklen_t *destlen, int *error) {
    uint8_t payload[64];          /* the start of the datagram that failed: not needed */
    uint8_t control[512];
    struct iovec iov = { .iov_base = payload, .iov_len = sizeof payload };
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_name = dest;
    msg.msg_namelen = sizeof(struct sockaddr_storage);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n;
    do {
        n = recvmsg(fd, &msg, MSG_ERRQUEUE | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
    *destlen = msg.msg_namelen;
    *error = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
        if ((c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_RECVERR) ||
            (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_RECVERR)) {
            struct sock_extended_err ee;
            memcpy(&ee, CMSG_DATA(c), sizeof ee);
            *error = (int)ee.ee_errno;
        }
    }
    return 1;
}

int cs_address_watch_open(void) {
#ifdef __linux__
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) return -1;
    struct sockaddr_nl local;
    memset(&local, 0, sizeof local);
    local.nl_family = AF_NETLINK;
    local.nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR;
    if (bind(fd, (struct sockaddr *)&local, sizeof local) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
#else
    errno = ENOSYS;
    return -1;
#endif
}

int cs_drain_datagrams(int fd) {
    uint8_t buffer[8192];
    int n = 0;
    for (;;) {
        ssize_t r = recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
        if (r >= 0) { n++; continue; }
        if (errno == EINTR) continue;
        /* ENOBUFS: the kernel dropped notifications; what is left to read is still drained, and
           the caller re-reads the addresses anyway. */
        if (errno == ENOBUFS) { n++; continue; }
        if (errno == EAGAIN || errno == EWOULDBLOCK) return n;
        return n > 0 ? n : -1;
    }
}

int cs_local_addresses(char *out, size_t size) {
    if (size == 0) { errno = EINVAL; return -1; }
    out[0] = 0;
    struct ifaddrs *list = NULL;
    if (getifaddrs(&list) != 0) return -1;
    size_t used = 0;
    int count = 0;
    for (struct ifaddrs *a = list; a != NULL; a = a->ifa_next) {
        if (a->ifa_addr == NULL || !(a->ifa_flags & IFF_UP)) continue;
        int family = a->ifa_addr->sa_family;
        if (family != AF_INET && family != AF_INET6) continue;
        char text[INET6_ADDRSTRLEN];
        const void *raw = family == AF_INET ? (const void *)&((struct sockaddr_in *)a->ifa_addr)->sin_addr
                                            : (const void *)&((struct sockaddr_in6 *)a->ifa_addr)->sin6_addr;
        if (inet_ntop(family, raw, text, sizeof text) == NULL) continue;
        const char *flags = "-";
        if (a->ifa_flags & IFF_LOOPBACK) flags = "l";
        else if (family == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)a->ifa_addr)->sin6_addr)) flags = "k";
        char line[IF_NAMESIZE + INET6_ADDRSTRLEN + 8];
        int len = snprintf(line, sizeof line, "%s %s %s\n", a->ifa_name, text, flags);
        if (len < 0 || (size_t)len >= sizeof line || used + (size_t)len + 1 > size) break;
        memcpy(out + used, line, (size_t)len);
        used += (size_t)len;
        out[used] = 0;
        count++;
    }
    freeifaddrs(list);
    return count;
}
