#ifndef SWITCHBOARD_HEAPSTATS_H
#define SWITCHBOARD_HEAPSTATS_H
#include <stddef.h>

/// Bytes of heap in use (glibc mallinfo2().uordblks + hblkhd); 0 where unavailable.
size_t hs_heap_in_use(void);
/// Returns free memory to the system (glibc malloc_trim); no-op elsewhere.
void hs_trim(void);

#endif
