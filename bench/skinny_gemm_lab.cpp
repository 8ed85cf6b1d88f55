// Skinny GEMM lab: linear at decode sizes, x [M, K] @ weight [N, K]^T, for every weight of
// Llama-3.2-1B (qkv 3072x2048, o 2048x2048, gate_up 16384x2048, down 2048x8192, lm_head
// 128256x2048) and M in {1, 2, 4, ..., 256}, in bf16 and f32. Every path is timed: cuBLASLt (the
// library), each skinny kernel of kernels/cuda/gemm/skinny_gemm.h that fits, and the measured
// choice the GEMM makes by default (named after the path it took). Before timing, every path is
// checked against the float64 reference at the same M and K (N = 88, so tails of every tile are
// covered, with a bias), its output poisoned first. Times come from device graphs of back-to-back
// calls that rotate over enough copies of the weight to overflow L2, so the weight streams from
// memory as in a decode step; rates are set against the measured copy and GEMM ceilings.
//
// Then the gated down projection, silu_and_mul_linear (x [M, 2 * 8192] -> [M, 2048]): each skinny
// kernel computing the activation as it reads x, checked against float64 like the rest, timed
// against the two steps it replaces (the activation kernel, then linear on its measured path) and
// against the op's measured choice.
//
// Last, the weight prefetch: a qkv-shaped GEMM, a few small kernels, an o-shaped GEMM, with the
// first asking for the second's weight (kernels/cuda/gemm/l2_prefetch.h) or not.
//
// --only TEXT runs the cases whose names contain TEXT: "<weight> M=<m> <dtype>" (e.g. "gate_up
// M=32 bf16"), "gated M=<m> <dtype>" and "prefetch M=<m>", with the checks at their M and K; a
// TEXT no case name contains is an error.
//
//   skinny_gemm_lab [--device cuda:N] [--quick] [--skip-timing] [--only TEXT]
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "bench/lab_harness.h"
#include "kernels/cuda/gemm/skinny_gemm.h"
#include "kernels/cuda/gpu_runtime.h"
#include "kernels/linear_path.h"
#include "runtime/check.h"
#include "runtime/kernel_registry.h"
#include "runtime/profiler/profiler.h"
#include "runtime/tensor.h"

namespace tessera::lab {
namespace {

constexpr double kNearZero = 1e-3;
constexpr int64_t kCheckRows = 88;  // N of the checks: 5.5 mma tiles, 22 simt_r4 tiles

struct Weight {
  const char* name;
  int64_t n, k;
};
constexpr Weight kWeights[] = {{"qkv", 3072, 2048},
                               {"o", 2048, 2048},
                               {"gate_up", 16384, 2048},
                               {"down", 2048, 8192},
                               {"lm_head", 128256, 2048}};
constexpr int64_t kRows[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
constexpr DType kDtypes[] = {DType::bf16, DType::f32};

// A path: the library, a skinny variant, or the measured choice.
struct Path {
  std::string name;
  const gpu::SkinnyVariant* variant = nullptr;  // skinny variants only
};

std::vector<Path> all_paths() {
  std::vector<Path> paths{{kLinearPathLibrary, nullptr}};
  for (const gpu::SkinnyVariant& variant : gpu::skinny_variants())
    paths.push_back({variant.name, &variant});
  paths.push_back({kLinearPathMeasured, nullptr});
  return paths;
}

bool fits(const Path& path, const gpu::SkinnyProblem& problem) {
  return path.variant == nullptr || path.variant->fits(problem);
}

// Runs `path` on one problem: variants launch directly, the library and the measured choice go
// through the linear kernel with the path forced.
void run_path(const Path& path, const Tensor& x, const Tensor& weight, const Tensor* bias,
              Tensor& out) {
  if (path.variant != nullptr) {
    path.variant->launch(gpu::linear_problem(x, weight, bias, out),
                         gpu::current_stream(x.device()));
    return;
  }
  ForceLinearPath forced(path.name);
  std::vector<Tensor> inputs{x, weight};
  if (bias != nullptr) inputs.push_back(*bias);
  run_kernel("linear", x.device().type, KernelArgs{inputs, Attributes{}, std::span(&out, 1)});
}

// The name of the path the measured choice takes on this problem: the profiler's annotation of
// the launch.
std::string measured_choice(const Tensor& x, const Tensor& weight, Tensor& out) {
  KernelProfiler profiler(x.device(), /*timing=*/true);
  {
    ProfilerScope active(profiler);
    profiler.start();
    ProfiledLaunch launch("linear", KernelClass::gemm);
    run_path(Path{kLinearPathMeasured, nullptr}, x, weight, nullptr, out);
  }
  profiler.stop();
  const std::string& name = profiler.launches().at(0).name;  // "linear[mma_t1]"
  const size_t open = name.find('[');
  return open == std::string::npos ? "?" : name.substr(open + 1, name.size() - open - 2);
}

// Every path against the float64 reference at M rows, K columns, kCheckRows weight rows, with a
// bias. Returns false when one fails, printing it.
bool check_paths(LabRandom& random, const std::vector<Path>& paths, DType dtype, int64_t m,
                 int64_t k) {
  const Tensor x = random.uniform({m, k}, dtype);
  const Tensor weight = random.uniform({kCheckRows, k}, dtype);
  const Tensor bias = random.uniform({kCheckRows}, dtype);
  const Tensor inputs[] = {x, weight, bias};
  const Expected expected = reference_outputs("linear", inputs, Attributes{})[0];
  const std::vector<float> poison(static_cast<size_t>(m * kCheckRows),
                                  std::numeric_limits<float>::quiet_NaN());
  bool all_passed = true;
  for (const Path& path : paths) {
    Tensor out = Tensor::from_floats(poison, {m, kCheckRows}, dtype, x.device());
    if (!fits(path, gpu::linear_problem(x, weight, &bias, out))) continue;
    run_path(path, x, weight, &bias, out);
    const Check check = compare(out, expected, kNearZero);
    if (!check.passed) {
      fmt::print("FAIL {} {} M={} N={} K={}: {} elements wrong, first at {}, worst {:.2f}\n",
                 path.name, dtype_name(dtype), m, kCheckRows, k, check.failing, check.first_failing,
                 check.worst);
      all_passed = false;
    }
  }
  return all_passed;
}

std::string case_name(std::string_view weight, int64_t m, DType dtype) {
  return fmt::format("{} M={} {}", weight, m, dtype_name(dtype));
}

// The weight prefetch's cases (bf16, qkv then o): M 1 and 8.
constexpr int64_t kPrefetchRows[] = {1, 8};
std::string prefetch_name(int64_t m) {
  return fmt::format("prefetch M={}", m);
}

// One table row: a weight, M and dtype, every path's time.
struct Row {
  std::string weight;
  int64_t m = 0, n = 0, k = 0;
  DType dtype = DType::bf16;
  std::vector<double> us;  // per path; 0: does not fit
  std::string chosen;
  double bytes = 0, flops = 0;
};

Row time_paths(LabTimer& timer, LabRandom& random, const std::vector<Path>& paths,
               const Weight& shape, int64_t m, DType dtype) {
  Row row{shape.name, m, shape.n, shape.k, dtype, {}, {}, 0, 0};
  const size_t element = element_size(dtype);
  const double weight_bytes = static_cast<double>(shape.n * shape.k) * static_cast<double>(element);
  // Enough copies of the weight to overflow L2 three times: each call streams from memory.
  const double l2 = static_cast<double>(gpu::device_limits(random.device().index).l2_bytes);
  const int copies = static_cast<int>(std::clamp(std::ceil(3 * l2 / weight_bytes), 1.0, 64.0));
  std::vector<Tensor> weights{random.uniform({shape.n, shape.k}, dtype)};
  for (int c = 1; c < copies; ++c) weights.push_back(weights[0].clone());
  const Tensor x = random.uniform({m, shape.k}, dtype);
  Tensor out = Tensor::empty({m, shape.n}, dtype, random.device());
  row.bytes = weight_bytes + static_cast<double>((m * shape.k + m * shape.n) * element);
  row.flops = 2.0 * static_cast<double>(m * shape.n * shape.k);
  const int calls = copies * static_cast<int>(std::ceil(20.0 / copies));
  for (const Path& path : paths) {
    if (!fits(path, gpu::linear_problem(x, weights[0], nullptr, out))) {
      row.us.push_back(0);
      continue;
    }
    row.us.push_back(timer.median_graph_us(
        [&](int call) { run_path(path, x, weights[call % copies], nullptr, out); }, calls));
  }
  row.chosen = measured_choice(x, weights[0], out);
  return row;
}

void print_rows(const std::vector<Row>& rows, const std::vector<Path>& paths,
                const Ceilings& ceilings) {
  std::string head = fmt::format("{:<8} {:>4} {:>6} {:>6} {:<5}", "weight", "M", "N", "K", "dtype");
  for (const Path& path : paths) head += fmt::format(" {:>9}", path.name);
  head += fmt::format("  {:<9} {:>8} {:>8} {:>7} {:>9}", "chosen", "GB/s", "TFLOP/s", "roofl.",
                      "vs cuBLAS");
  fmt::print("{}\n", head);
  for (const Row& row : rows) {
    std::string line = fmt::format("{:<8} {:>4} {:>6} {:>6} {:<5}", row.weight, row.m, row.n, row.k,
                                   dtype_name(row.dtype));
    for (double us : row.us)
      line += us > 0 ? fmt::format(" {:>9.2f}", us) : fmt::format(" {:>9}", "-");
    const double measured_us = row.us.back();
    const Achieved rates = achieved(ceilings, row.bytes, row.flops, measured_us);
    line += fmt::format("  {:<9} {:>8.0f} {:>8.2f} {:>6.0f}% {:>8.2f}x", row.chosen, rates.gb_per_s,
                        rates.tflops, rates.roofline_percent, row.us.front() / measured_us);
    fmt::print("{}\n", line);
  }
  fmt::print(
      "times in us per call (device graphs of back-to-back calls over rotating weight copies); "
      "GB/s, TFLOP/s and roofline of the measured choice; vs cuBLAS: cuBLASLt time / measured "
      "choice time\n");
}

// ---- The gated down projection: the activation computed in the GEMM's input read.

constexpr Weight kDown = {"down", 2048, 8192};

gpu::SkinnyProblem gated_problem(const Tensor& gated, const Tensor& weight, Tensor& out,
                                 Tensor& activated) {
  return gpu::gated_linear_problem(gated, weight, nullptr, out, activated,
                                   gpu::SkinnyActivation::silu, Attributes{});
}

void run_fused_op(const Tensor& gated, const Tensor& weight, Tensor& out, Tensor& activated) {
  std::vector<Tensor> inputs{gated, weight};
  Tensor outputs[] = {out, activated};
  run_kernel("silu_and_mul_linear", gated.device().type,
             KernelArgs{inputs, Attributes{}, std::span(outputs)});
}

// Each skinny kernel computing the activation against float64: the product is checked against
// the reference linear of the activation the activation kernel computes (the kernels round it
// to the dtype first, as the two steps do), and the activation the kernel stores must be those
// bits.
bool check_gated(LabRandom& random, DType dtype, int64_t m) {
  const Tensor gated = random.uniform({m, 2 * kDown.k}, dtype);
  const Tensor weight = random.uniform({kCheckRows, kDown.k}, dtype);
  Tensor want_activated = Tensor::empty({m, kDown.k}, dtype, gated.device());
  run_kernel("silu_and_mul", gated.device().type,
             KernelArgs{std::span(&gated, 1), Attributes{}, std::span(&want_activated, 1)});
  const Tensor inputs[] = {want_activated, weight};
  const Expected expected = reference_outputs("linear", inputs, Attributes{})[0];
  const std::vector<float> want_bits = want_activated.to(kCPU).to_floats();
  bool passed = true;
  for (const gpu::SkinnyVariant& variant : gpu::skinny_variants()) {
    Tensor out =
        Tensor::from_floats(std::vector<float>(static_cast<size_t>(m * kCheckRows), std::nanf("")),
                            {m, kCheckRows}, dtype, gated.device());
    Tensor activated =
        Tensor::from_floats(std::vector<float>(static_cast<size_t>(m * kDown.k), std::nanf("")),
                            {m, kDown.k}, dtype, gated.device());
    const gpu::SkinnyProblem problem = gated_problem(gated, weight, out, activated);
    if (!variant.fits(problem)) continue;
    variant.launch(problem, gpu::current_stream(gated.device()));
    const Check check = compare(out, expected, kNearZero);
    const bool same_activation = activated.to(kCPU).to_floats() == want_bits;
    if (!check.passed || !same_activation) {
      fmt::print("FAIL gated {} {} M={}: {} elements wrong, first at {}, worst {:.2f}{}\n",
                 variant.name, dtype_name(dtype), m, check.failing, check.first_failing,
                 check.worst, same_activation ? "" : "; stored activation differs");
      passed = false;
    }
  }
  return passed;
}

void time_gated(const LabArgs& args, LabTimer& timer, LabRandom& random, const Ceilings& ceilings,
                DType dtype) {
  if (std::none_of(std::begin(kRows), std::end(kRows),
                   [&](int64_t m) { return args.selects(case_name("gated", m, dtype)); }))
    return;
  fmt::print(
      "\nsilu_and_mul_linear, down {}x{} {}: us per call (two steps: silu_and_mul, then "
      "linear on its measured path; op: the op's measured choice)\n",
      kDown.n, kDown.k, dtype_name(dtype));
  std::string head = fmt::format("{:>4} {:>10}", "M", "two steps");
  for (const gpu::SkinnyVariant& variant : gpu::skinny_variants())
    head += fmt::format(" {:>9}", variant.name);
  fmt::print("{} {:>9} {:>8} {:>7}\n", head, "op", "GB/s", "roofl.");
  const size_t element = element_size(dtype);
  const double weight_bytes = static_cast<double>(kDown.n * kDown.k * element);
  const double l2 = static_cast<double>(gpu::device_limits(random.device().index).l2_bytes);
  const int copies = static_cast<int>(std::clamp(std::ceil(3 * l2 / weight_bytes), 1.0, 64.0));
  std::vector<Tensor> weights{random.uniform({kDown.n, kDown.k}, dtype)};
  for (int c = 1; c < copies; ++c) weights.push_back(weights[0].clone());
  const int calls = copies * static_cast<int>(std::ceil(20.0 / copies));
  for (int64_t m : kRows) {
    if (!args.selects(case_name("gated", m, dtype))) continue;
    const Tensor gated = random.uniform({m, 2 * kDown.k}, dtype);
    Tensor activated = Tensor::empty({m, kDown.k}, dtype, random.device());
    Tensor out = Tensor::empty({m, kDown.n}, dtype, random.device());
    std::string line = fmt::format("{:>4}", m);
    const double two_steps_us = timer.median_graph_us(
        [&](int call) {
          std::vector<Tensor> x{gated};
          run_kernel("silu_and_mul", gated.device().type,
                     KernelArgs{x, Attributes{}, std::span(&activated, 1)});
          run_path(Path{kLinearPathMeasured, nullptr}, activated, weights[call % copies], nullptr,
                   out);
        },
        calls);
    line += fmt::format(" {:>10.2f}", two_steps_us);
    for (const gpu::SkinnyVariant& variant : gpu::skinny_variants()) {
      const gpu::SkinnyProblem problem = gated_problem(gated, weights[0], out, activated);
      if (!variant.fits(problem)) {
        line += fmt::format(" {:>9}", "-");
        continue;
      }
      line += fmt::format(" {:>9.2f}", timer.median_graph_us(
                                           [&](int call) {
                                             gpu::SkinnyProblem rotated = problem;
                                             rotated.weight = weights[call % copies].data_ptr();
                                             variant.launch(rotated,
                                                            gpu::current_stream(gated.device()));
                                           },
                                           calls));
    }
    run_fused_op(gated, weights[0], out, activated);  // measures outside the capture
    const double op_us = timer.median_graph_us(
        [&](int call) { run_fused_op(gated, weights[call % copies], out, activated); }, calls);
    const double bytes =
        weight_bytes + static_cast<double>((3 * m * kDown.k + m * kDown.n) * element);
    const Achieved rates =
        achieved(ceilings, bytes, 2.0 * static_cast<double>(m * kDown.n * kDown.k), op_us);
    fmt::print("{} {:>9.2f} {:>8.0f} {:>6.0f}%\n", line, op_us, rates.gb_per_s,
               rates.roofline_percent);
    backend(random.device()).allocator(random.device().index).empty_cache();
  }
}

// ---- The weight prefetch (kernels/cuda/gemm/l2_prefetch.h): two GEMMs of a decode layer with
// small kernels between them, as a step runs them.

// A GEMM, then `window` launches of a small kernel that leaves memory idle (silu_and_mul on one
// [M, 4096] row block, standing in for rope and attention), then the next GEMM; the first asks
// for the second's weight or not. Weight copies rotate, so each pair streams from memory.
void time_prefetch(const LabArgs& args, LabTimer& timer, LabRandom& random, DType dtype) {
  if (std::none_of(std::begin(kPrefetchRows), std::end(kPrefetchRows),
                   [&](int64_t m) { return args.selects(prefetch_name(m)); }))
    return;
  const Weight& first = kWeights[0];  // qkv, whose kernel ends by asking for o's weight
  const Weight& second = kWeights[1];
  fmt::print(
      "\nweight prefetch: {} linear, W small kernels, {} linear ({}); us per pair, the first "
      "asking for the second's weight (with) or not (without), measured paths\n",
      first.name, second.name, dtype_name(dtype));
  fmt::print("{:>4} {:>3} {:>9} {:>9} {:>8}\n", "M", "W", "without", "with", "saved");
  const size_t element = element_size(dtype);
  const double pair_bytes =
      static_cast<double>((first.n * first.k + second.n * second.k) * element);
  const double l2 = static_cast<double>(gpu::device_limits(random.device().index).l2_bytes);
  const int copies = static_cast<int>(std::clamp(std::ceil(3 * l2 / pair_bytes), 1.0, 64.0));
  std::vector<Tensor> firsts, seconds;
  for (int c = 0; c < copies; ++c) {
    firsts.push_back(random.uniform({first.n, first.k}, dtype));
    seconds.push_back(random.uniform({second.n, second.k}, dtype));
  }
  const int calls = copies * static_cast<int>(std::ceil(20.0 / copies));
  for (int64_t m : kPrefetchRows) {
    if (!args.selects(prefetch_name(m))) continue;
    const Tensor x = random.uniform({m, first.k}, dtype);
    const Tensor gated = random.uniform({m, 2 * second.k}, dtype);
    Tensor first_out = Tensor::empty({m, first.n}, dtype, random.device());
    Tensor activated = Tensor::empty({m, second.k}, dtype, random.device());
    Tensor second_out = Tensor::empty({m, second.n}, dtype, random.device());
    for (int window : {0, 3}) {
      double us[2] = {0, 0};
      for (bool prefetch : {false, true}) {
        us[prefetch] = timer.median_graph_us(
            [&](int call) {
              const Tensor& next = seconds[call % copies];
              std::vector<Tensor> first_inputs{x, firsts[call % copies]};
              run_kernel("linear", x.device().type,
                         KernelArgs{first_inputs, Attributes{}, std::span(&first_out, 1),
                                    prefetch ? &next : nullptr});
              std::vector<Tensor> small{gated};
              for (int w = 0; w < window; ++w)
                run_kernel("silu_and_mul", x.device().type,
                           KernelArgs{small, Attributes{}, std::span(&activated, 1)});
              std::vector<Tensor> second_inputs{activated, next};
              run_kernel("linear", x.device().type,
                         KernelArgs{second_inputs, Attributes{}, std::span(&second_out, 1)});
            },
            calls);
      }
      fmt::print("{:>4} {:>3} {:>9.2f} {:>9.2f} {:>7.1f}%\n", m, window, us[0], us[1],
                 100.0 * (us[0] - us[1]) / us[0]);
    }
    // What a prefetch could win at most: the second GEMM alone, streaming from memory (rotating
    // copies) against reading one copy that stays in L2.
    std::vector<Tensor> second_inputs{activated, seconds[0]};
    const double cold_us = timer.median_graph_us(
        [&](int call) {
          second_inputs[1] = seconds[call % copies];
          run_kernel("linear", x.device().type,
                     KernelArgs{second_inputs, Attributes{}, std::span(&second_out, 1)});
        },
        calls);
    second_inputs[1] = seconds[0];
    const double hot_us = timer.median_graph_us(
        [&](int) {
          run_kernel("linear", x.device().type,
                     KernelArgs{second_inputs, Attributes{}, std::span(&second_out, 1)});
        },
        calls);
    fmt::print(
        "{:>4} {} alone: {:.2f} us from memory, {:.2f} us with its weight in L2; paths: {} {}, "
        "{} {} (only skinny kernels prefetch)\n",
        m, second.name, cold_us, hot_us, first.name, measured_choice(x, firsts[0], first_out),
        second.name, measured_choice(activated, seconds[0], second_out));
  }
  backend(random.device()).allocator(random.device().index).empty_cache();
}

int run_lab(const LabArgs& args) {
  LabRandom random(args.device);
  LabTimer timer(args.device, args.quick ? 5 : 11);
  const std::vector<Path> paths = all_paths();
  bool passed = true;
  // The checks at the M and K of the cases --only keeps (every case without it): the linear
  // cases' own, the gated down projection's (K 8192), the prefetch's (bf16, K 2048).
  auto checked = [&](DType dtype, int64_t m, int64_t k) {
    for (const Weight& shape : kWeights)
      if (shape.k == k && args.selects(case_name(shape.name, m, dtype))) return true;
    if (k == kDown.k && args.selects(case_name("gated", m, dtype))) return true;
    return dtype == DType::bf16 && k == kWeights[0].k &&
           std::find(std::begin(kPrefetchRows), std::end(kPrefetchRows), m) !=
               std::end(kPrefetchRows) &&
           args.selects(prefetch_name(m));
  };
  bool any_case = false;
  for (DType dtype : kDtypes)
    for (int64_t k : {int64_t{2048}, int64_t{8192}})
      for (int64_t m : kRows) any_case = any_case || checked(dtype, m, k);
  TESSERA_REQUIRE(any_case,
                  "--only '{}' matches no case (cases are named '<weight> M=<m> <dtype>' with "
                  "weight qkv, o, gate_up, down or lm_head, 'gated M=<m> <dtype>' and "
                  "'prefetch M=<m>')",
                  args.only);
  const std::string which =
      args.only.empty() ? "M 1..256" : fmt::format("the M of the cases matching '{}'", args.only);
  for (DType dtype : kDtypes)
    for (int64_t k : {int64_t{2048}, int64_t{8192}})
      for (int64_t m : kRows)
        if (!args.skip_checks && checked(dtype, m, k))
          passed = check_paths(random, paths, dtype, m, k) && passed;
  fmt::print("checks against float64 (every path, {}, their K, N {} with bias): {}\n", which,
             kCheckRows,
             args.skip_checks ? "skipped (--skip-checks)"
             : passed         ? "all passed"
                              : "FAILED");
  bool gated_passed = true;
  for (DType dtype : kDtypes)
    for (int64_t m : kRows)
      if (!args.skip_checks && args.selects(case_name("gated", m, dtype)))
        gated_passed = check_gated(random, dtype, m) && gated_passed;
  fmt::print(
      "checks of silu_and_mul_linear against float64 (every skinny kernel, {}, K {}, N {}): "
      "{}\n\n",
      which, kDown.k, kCheckRows,
      args.skip_checks ? "skipped (--skip-checks)"
      : gated_passed   ? "all passed"
                       : "FAILED");
  passed = passed && gated_passed;
  if (args.skip_timing) return passed ? 0 : 1;

  const Ceilings ceilings = measure_ceilings(timer, random, /*with_gemm=*/true);
  std::vector<Row> rows;
  for (DType dtype : kDtypes)
    for (const Weight& shape : kWeights)
      for (int64_t m : kRows) {
        if (!args.selects(case_name(shape.name, m, dtype))) continue;
        rows.push_back(time_paths(timer, random, paths, shape, m, dtype));
        backend(args.device).allocator(args.device.index).empty_cache();
      }
  print_rows(rows, paths, ceilings);
  for (DType dtype : kDtypes) time_gated(args, timer, random, ceilings, dtype);
  time_prefetch(args, timer, random, DType::bf16);
  return passed ? 0 : 1;
}

}  // namespace
}  // namespace tessera::lab

int main(int argc, char** argv) {
  return tessera::lab::lab_main(
      "skinny_gemm_lab",
      "linear at decode sizes (Llama-3.2-1B weights, M 1..256, bf16 and f32): cuBLASLt, every "
      "skinny kernel and the measured choice, checked against float64, then timed",
      argc, argv, tessera::lab::run_lab, /*names_cases=*/true);
}
