/*
 * CMapGuard: keeps a process alive when a file it has mapped is truncated by another process.
 *
 * Touching a page of a file mapping past the file's end raises SIGBUS (mmap(2)). A
 * reader registers each window it maps (mg_register); the SIGBUS handler, installed once and
 * chained to the one before it, maps anonymous zero pages over the rest of a registered window
 * from the faulting page on (MAP_FIXED, so the faulting load completes with zeros) and raises
 * the window's flag, which the reader tests (mg_hit) before it trusts what it read. A fault
 * outside every registered window goes to the previous handler, or kills the process with
 * SIGBUS as before. Written from the Linux man pages (mmap(2), sigaction(2)).
 */
#ifndef SWITCHBOARD_CMAPGUARD_H
#define SWITCHBOARD_CMAPGUARD_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How many windows may be registered at once (one per open mapped reader). */
#define MG_SLOTS 64

/* The flags the handler raises, one per slot (read them with mg_hit). */
extern int mg_flags[MG_SLOTS];

/* Registers the mapped window [start, start + length), installing the handler on first use.
 * Returns its slot, or -1 when every slot is taken or the handler cannot be installed (the
 * caller then reads the file instead of mapping it). */
int mg_register(void *start, size_t length);

/* Forgets a slot's window (before it is unmapped) and lowers its flag. */
void mg_unregister(int slot);

/* Whether the file under the slot's window shrank while it was read: non-zero once a load in
 * it faulted and was answered with zeros. */
static inline int mg_hit(int slot) { return __atomic_load_n(&mg_flags[slot], __ATOMIC_ACQUIRE); }

#ifdef __cplusplus
}
#endif

#endif
