/* CMapGuard: see include/CMapGuard.h. */
#define _GNU_SOURCE
#include "CMapGuard.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int mg_flags[MG_SLOTS];

/* A window is published by storing `low` then `high` (0: free); the handler reads them with
 * acquire loads, so it never sees a half-written window as its own. */
static uintptr_t mg_low[MG_SLOTS];
static uintptr_t mg_high[MG_SLOTS];
static struct sigaction mg_previous;
static uintptr_t mg_page = 4096;
static int mg_installed = -1;
static pthread_once_t mg_once = PTHREAD_ONCE_INIT;

static void mg_handler(int sig, siginfo_t *info, void *context) {
    uintptr_t address = (uintptr_t)info->si_addr;
    for (int i = 0; i < MG_SLOTS; i++) {
        uintptr_t high = __atomic_load_n(&mg_high[i], __ATOMIC_ACQUIRE);
        if (high == 0) continue;
        uintptr_t low = __atomic_load_n(&mg_low[i], __ATOMIC_ACQUIRE);
        if (low == 0 || high <= low || address < low || address >= high) continue;
        uintptr_t page = address & ~(mg_page - 1);
        if (page < low) page = low;
        /* mmap is async-signal-safe in practice (a system call); zeros replace the lost pages. */
        void *p = mmap((void *)page, high - page, PROT_READ, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) break;
        __atomic_store_n(&mg_flags[i], 1, __ATOMIC_RELEASE);
        return;
    }
    /* Not ours: the handler that was there before, or the default action (the load faults again). */
    if ((mg_previous.sa_flags & SA_SIGINFO) && mg_previous.sa_sigaction != NULL) {
        mg_previous.sa_sigaction(sig, info, context);
        return;
    }
    if (mg_previous.sa_handler != SIG_DFL && mg_previous.sa_handler != SIG_IGN && mg_previous.sa_handler != NULL) {
        mg_previous.sa_handler(sig);
        return;
    }
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGBUS, &dfl, NULL);
}

static void mg_install(void) {
    long page = sysconf(_SC_PAGESIZE);
    if (page > 0) mg_page = (uintptr_t)page;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = mg_handler;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    mg_installed = sigaction(SIGBUS, &action, &mg_previous);
}

int mg_register(void *start, size_t length) {
    pthread_once(&mg_once, mg_install);
    if (mg_installed != 0 || start == NULL || length == 0) return -1;
    for (int i = 0; i < MG_SLOTS; i++) {
        uintptr_t expected = 0;
        /* Claim a free slot with a placeholder high bound that matches no address yet. */
        if (!__atomic_compare_exchange_n(&mg_high[i], &expected, (uintptr_t)1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) continue;
        __atomic_store_n(&mg_flags[i], 0, __ATOMIC_RELEASE);
        __atomic_store_n(&mg_low[i], (uintptr_t)start, __ATOMIC_RELEASE);
        __atomic_store_n(&mg_high[i], (uintptr_t)start + length, __ATOMIC_RELEASE);
        return i;
    }
    return -1;
}

void mg_unregister(int slot) {
    if (slot < 0 || slot >= MG_SLOTS) return;
    __atomic_store_n(&mg_low[slot], (uintptr_t)0, __ATOMIC_RELEASE);
    __atomic_store_n(&mg_flags[slot], 0, __ATOMIC_RELEASE);
    __atomic_store_n(&mg_high[slot], (uintptr_t)0, __ATOMIC_RELEASE);
}
