// glibc's malloc statistics for the benchmarks (malloc.h is not part of Swift's Glibc module).
#include "heapstats.h"
#if defined(__linux__)
#include <malloc.h>
#endif

size_t hs_heap_in_use(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
#else
    return 0;
#endif
}

void hs_trim(void) {
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
}
