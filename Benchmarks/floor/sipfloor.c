/*
 * sipfloor: the least a UDP SIP answerer can spend per call, as a yardstick for
 * scripts/bench-cpu (issue 17). It is not a SIP implementation: it parses nothing, validates
 * nothing, keeps no transaction or dialog and never retransmits. For each datagram it finds the
 * start of the Via, From, To, Call-ID and CSeq lines with a byte scan, copies them into a
 * 200 OK (a To without a tag gets one), and sends it back; an ACK gets nothing. With --ring, an
 * INVITE gets a 180 Ringing before its 200, as SIPp's built-in uas sends.
 *
 * What it measures: the socket work of a call (one blocking recvmmsg per wake-up, as
 * Switchboard's UDP loop does, and one sendto per response) plus a few hundred instructions
 * of user code. A server's CPU per call divided by sipfloor's is what its SIP processing costs
 * on top of the kernel's floor.
 *
 * usage: sipfloor PORT [--ring]      (binds 127.0.0.1:PORT; runs until killed)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define BATCH 32
#define MAXMSG 65536

/* Appends the header line starting at p (through its CRLF) to out; returns the new end. */
static char *copy_line(char *out, const char *p, const char *end) {
    const char *e = memchr(p, '\n', (size_t)(end - p));
    size_t n = e ? (size_t)(e - p + 1) : (size_t)(end - p);
    memcpy(out, p, n);
    return out + n;
}

/* Writes a response with `status` to the request `req` (length n) into out; returns its length. */
static size_t respond(char *out, const char *status, const char *req, size_t n, int port) {
    char *w = out;
    size_t sl = strlen(status);
    memcpy(w, status, sl);
    w += sl;
    const char *end = req + n;
    const char *p = memchr(req, '\n', n);
    if (!p) return 0;
    p++;
    while (p < end && *p != '\r' && *p != '\n') {
        if (!strncasecmp(p, "Via:", 4) || !strncasecmp(p, "From:", 5) || !strncasecmp(p, "Call-ID:", 8) ||
            !strncasecmp(p, "CSeq:", 5)) {
            w = copy_line(w, p, end);
        } else if (!strncasecmp(p, "To:", 3)) {
            const char *e = memchr(p, '\n', (size_t)(end - p));
            if (!e) return 0;
            const char *stop = e > p && e[-1] == '\r' ? e - 1 : e;
            memcpy(w, p, (size_t)(stop - p));
            w += stop - p;
            if (!memmem(p, (size_t)(stop - p), ";tag=", 5)) {
                memcpy(w, ";tag=floor", 10);
                w += 10;
            }
            memcpy(w, "\r\n", 2);
            w += 2;
        }
        const char *e = memchr(p, '\n', (size_t)(end - p));
        if (!e) break;
        p = e + 1;
    }
    w += sprintf(w, "Contact: <sip:floor@127.0.0.1:%d>\r\nContent-Length: 0\r\n\r\n", port);
    return (size_t)(w - out);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: sipfloor PORT [--ring]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    int ring = argc > 2 && !strcmp(argv[2], "--ring");
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        perror("sipfloor");
        return 1;
    }
    static char bufs[BATCH][MAXMSG];
    static char out[MAXMSG + 4096];
    struct sockaddr_in from[BATCH];
    struct iovec iov[BATCH];
    struct mmsghdr msgs[BATCH];
    for (;;) {
        for (int i = 0; i < BATCH; i++) {
            iov[i] = (struct iovec){.iov_base = bufs[i], .iov_len = MAXMSG};
            msgs[i].msg_hdr = (struct msghdr){.msg_name = &from[i], .msg_namelen = sizeof from[i], .msg_iov = &iov[i], .msg_iovlen = 1};
        }
        int got = recvmmsg(fd, msgs, BATCH, MSG_WAITFORONE, NULL);
        if (got < 0) continue;
        for (int i = 0; i < got; i++) {
            const char *m = bufs[i];
            size_t n = msgs[i].msg_len;
            if (n < 8 || !memcmp(m, "SIP/", 4) || !memcmp(m, "ACK ", 4)) continue;
            if (ring && !memcmp(m, "INVITE ", 7)) {
                size_t r = respond(out, "SIP/2.0 180 Ringing\r\n", m, n, port);
                if (r) sendto(fd, out, r, 0, (struct sockaddr *)&from[i], msgs[i].msg_hdr.msg_namelen);
            }
            size_t r = respond(out, "SIP/2.0 200 OK\r\n", m, n, port);
            if (r) sendto(fd, out, r, 0, (struct sockaddr *)&from[i], msgs[i].msg_hdr.msg_namelen);
        }
    }
}
