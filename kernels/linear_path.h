// Which implementation a GPU linear layer runs. By default each problem (shape, dtype, alignment)
// takes, on its first call, the library GEMM (cuBLASLt, the fastest of the first
// kLibraryAlgorithms algorithms its heuristic offers) or a skinny kernel that can run it
// (kernels/cuda/gemm/skinny_gemm.h: weight-streaming GEMV and tensor-core skinny GEMM for up to 256
// rows), each timed on its own operands, by the rule of kernels/cuda/gemm/skinny_choice.h (a skinny
// kernel is credited for what it overlaps in a step), and keeps it (kernels/cuda/gemm/gemm.cpp's
// per-shape plan cache, and kernels/measured_choices.h across processes). Labs, tests and
// benchmarks can force one path for the thread.
#pragma once

#include <string>
#include <vector>

#include "runtime/device.h"

namespace tessera {

// The path names besides the variants: measured per shape (the default), or the library only.
inline constexpr const char* kLinearPathMeasured = "measured";
inline constexpr const char* kLinearPathLibrary = "library";
// The library's algorithms a measured problem times: the first ones of its heuristic, which
// "library:N" (N from 1) forces one of.
inline constexpr int kLibraryAlgorithms = 8;

// Forces `path` (measured, library, library:N, or a variant of linear_variants()) for this thread
// while the guard lives; guards nest. A variant that cannot run a problem (too many rows, a dtype
// or alignment it lacks) leaves that problem to the library; library:N runs the library's N-th
// heuristic algorithm, or its last where it offers fewer (for every cuBLASLt GEMM of the thread,
// matmul too). Unknown names throw, listing the valid ones.
class ForceLinearPath {
 public:
  explicit ForceLinearPath(const std::string& path);
  ~ForceLinearPath();
  ForceLinearPath(const ForceLinearPath&) = delete;
  ForceLinearPath& operator=(const ForceLinearPath&) = delete;

 private:
  const std::string* previous_;
  std::string path_;
};

// The forced path of this thread, or nullptr when each problem takes its measured choice.
const std::string* forced_linear_path();
// Whether this thread's forced path is the library's (library or library:N).
bool library_path_forced();
// N when this thread's forced path is library:N, otherwise 0.
int forced_library_algorithm();

// Whether `path` names a linear path of `type` devices: measured, library, library:N or one of
// linear_variants(type).
bool is_linear_path(const std::string& path, DeviceType type);
// Those paths as an error lists them (library:N as one range).
std::vector<std::string> linear_path_names(DeviceType type);

// The skinny variants built for `type` devices, in registration order (empty where none are).
std::vector<std::string> linear_variants(DeviceType type);
// Called once per variant by the kernel file that defines it.
bool register_linear_variant(DeviceType type, const std::string& name);

}  // namespace tessera
