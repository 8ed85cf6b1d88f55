// What the fuzz targets (tests/fuzz/fuzz_*.cpp) share. Each target defines libFuzzer's entry
// points and is built either as a libFuzzer program (TESSERA_FUZZ=ON, clang) or, with any
// compiler, as a replay program that runs every file of a corpus (replay_main.cpp), which is how
// ctest replays the committed corpora.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <random>
#include <string>
#include <string_view>

extern "C" {
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// fuzz_support.cpp defines a weak one that quiets the logs: a target defines its own only when it
// sets more up.
int LLVMFuzzerInitialize(int* argc, char*** argv);
// libFuzzer's own mutator, which the structure-aware mutators fall back on.
size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);
}

namespace tessera::fuzz {

// A directory of this process's own (under /dev/shm when there is one), removed at exit.
const std::string& scratch_dir();
// Writes `bytes` to scratch_dir()/relative_path (creating folders) and returns the path.
std::string write_scratch_file(const std::string& relative_path, std::string_view bytes);

// Logs off: a fuzzer runs millions of inputs, most of them rejected with a warning.
void quiet_logs();

// The fuzzer's input bytes as text.
inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs `body`. A tessera::Error is the expected outcome of bad input, but its message must name
// one of `names` (the file, the key, the setting) so that a user knows what to fix. Anything else
// (an internal error, std::bad_alloc, a JSON or YAML library exception) or an error naming none of
// them aborts, which the fuzzer reports as a crash with the input that caused it.
void expect_clean_failure(const std::function<void()>& body,
                          std::initializer_list<std::string_view> names);

// Aborts with `message` when `condition` is false: a property every input must keep.
void require(bool condition, std::string_view message);

// A number that tends to break size arithmetic: 0, 1, powers of two and their neighbours up to
// 2^64 - 1, or `near` moved by a little.
uint64_t interesting_number(std::minstd_rand& random, uint64_t near);

// Replaces data[0, size) by `bytes` when they fit in max_size; returns the new size, or falls back
// on LLVMFuzzerMutate when they do not.
size_t store_mutation(const std::string& bytes, uint8_t* data, size_t size, size_t max_size);

}  // namespace tessera::fuzz
