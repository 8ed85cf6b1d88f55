// The process heap (glibc malloc; elsewhere these do nothing). glibc keeps freed memory for reuse,
// so a peak (a huge request or response) would stay resident after it is freed: a server hands
// it back after such peaks, and keeps one arena, since malloc_trim cannot shrink the top of a
// thread's own arena and every handler thread would otherwise keep one of its own.
#pragma once

namespace tessera {

// Before the process starts its threads.
void limit_heap_arenas(int arenas);
// Hands the heap's free pages back to the operating system.
void release_free_memory();

}  // namespace tessera
