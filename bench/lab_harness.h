// What the kernel labs (kernel_lab, custom_op_lab, attention_lab) share: their command line and
// main, random device data, event timing, the measured ceilings (device-to-device copy bandwidth,
// bf16 GEMM throughput) a kernel's achieved GB/s and TFLOP/s are set against, and the check of a
// kernel's output against the float64 references of tests/support/reference.h.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/attributes.h"
#include "runtime/backend/backend.h"
#include "runtime/tensor.h"

namespace tessera::lab {

constexpr double kGB = 1e9;
constexpr double kTera = 1e12;

struct LabArgs {
  Device device;             // --device D, else the first GPU
  bool quick = false;        // --quick: fewer timing samples
  bool skip_timing = false;  // --skip-timing: the float64 checks only
  std::string only;          // --only TEXT (labs that name their cases): cases containing TEXT
  bool skip_checks = false;  // --skip-checks (labs that name their cases): the timing only, so
                             // that a profiler's first launches of a kernel are timed ones
  int samples() const { return quick ? 5 : 21; }
  // Whether the case named `name` runs: every case without --only.
  bool selects(std::string_view name) const {
    return only.empty() || name.find(only) != std::string_view::npos;
  }
};

// A lab's main: logs to stderr, parses `--quick`, `--skip-timing`, `--device D` and, for a lab
// that names its cases (`names_cases`), `--only TEXT` and `--skip-checks` (usage errors exit 2),
// needs a GPU (exit 1 without one), runs `body` and turns an exception into a message and exit
// status 1. `body` returns the exit status: non-zero when a check failed.
int lab_main(std::string_view lab, std::string_view summary, int argc, char** argv,
             const std::function<int(const LabArgs&)>& body, bool names_cases = false);

// Random device data from one seeded generator.
class LabRandom {
 public:
  explicit LabRandom(Device device, uint64_t seed = 20240611);
  // Uniform values in [low, high) rounded through `dtype`. Large tensors tile one random block on
  // the device, which is as good as fresh data for timing and far faster to make.
  Tensor uniform(const Shape& sizes, DType dtype, double low = -1.0, double high = 1.0);
  // Uniform integers in [0, bound).
  Tensor integers(const Shape& sizes, DType dtype, int64_t bound);
  std::mt19937_64& generator() { return generator_; }
  Device device() const { return device_; }

 private:
  Device device_;
  std::mt19937_64 generator_;
};

// Event timing on the device's current stream.
class LabTimer {
 public:
  LabTimer(Device device, int samples);
  // Median microseconds per call of `launch(call)` (call counts every call, so a lab can rotate
  // through buffers): after warm-up, each sample runs enough calls back to back to span about a
  // millisecond, so event resolution does not matter.
  double median_us(const std::function<void(int call)>& launch);
  // The same for kernels shorter than their host launch: `calls` calls captured into one device
  // graph (after `calls` uncaptured warm-up calls), whose replays are timed, so that host launch
  // time stays out of the figure.
  double median_graph_us(const std::function<void(int call)>& launch, int calls);

 private:
  Device device_;
  int samples_;
};

// What the device can do at best, measured: the roofline a kernel is set against.
struct Ceilings {
  double copy_gb_per_s = 0;  // device-to-device copy of 1 GiB, read + write counted
  double gemm_tflops = 0;    // bf16 8192^3 GEMM through the matmul kernel (cuBLAS); 0: not measured
};
Ceilings measure_ceilings(LabTimer& timer, LabRandom& random, bool with_gemm);

// A kernel's achieved rates for the bytes it must move and the FLOPs it must do in `us`.
struct Achieved {
  double gb_per_s = 0;
  double tflops = 0;
  double copy_percent = 0;      // of the copy bandwidth
  double gemm_percent = 0;      // of the GEMM throughput (0 when not measured)
  double roofline_percent = 0;  // the time the ceilings allow for both, over the time taken
  const char* bound = "mem";    // which ceiling sets that time: "mem" or "flop"
};
Achieved achieved(const Ceilings& ceilings, double bytes, double flops, double us);

// ---- float64 checks.

// The expected outputs of a kernel: tests/support/reference.h's float64 op on exactly the values
// the kernel read, and for ops that sum many products the same op on |inputs|, the magnitude that
// f32 accumulation error scales with (empty otherwise).
struct Expected {
  std::vector<double> values;
  std::vector<double> magnitude;
};
std::vector<Expected> reference_outputs(const std::string& op, std::span<const Tensor> inputs,
                                        const Attributes& attributes);

struct Check {
  bool passed = true;
  double worst = 0;  // max over elements of |got - expected| / allowed
  int64_t failing = 0;
  int64_t first_failing = -1;
};
// Allowed error per element: rtol * (|expected| + near_zero) + 2^-20 * magnitude, with rtol the
// output dtype's (f32 1e-5, f16 2e-3, bf16 1.6e-2; integers exact). near_zero widens the bound
// for results near zero after cancellation; NaN fails unless expected.
Check compare(const Tensor& got, const Expected& expected, double near_zero);
double relative_tolerance(DType dtype);

}  // namespace tessera::lab
