#include "runtime/cpu/host_memory.h"

#include <cstdlib>  // defines __GLIBC__ where the C library is glibc
#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace tessera {

void limit_heap_arenas([[maybe_unused]] int arenas) {
#ifdef __GLIBC__
  mallopt(M_ARENA_MAX, arenas);
#endif
}

void release_free_memory() {
#ifdef __GLIBC__
  malloc_trim(0);  // every arena's free pages, not only the top of the main one
#endif
}

}  // namespace tessera
