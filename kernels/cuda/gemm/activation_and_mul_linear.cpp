// GPU kernels of silu_and_mul_linear and gelu_and_mul_linear (compile/ops/
// activation_and_mul_linear.cpp). Up to kSkinnyMaxRows rows, a skinny kernel can compute the
// activation as it reads the product's input (skinny_gemm.h: one launch, the activation stored by
// the same kernel); otherwise the activation kernel and linear run one after the other
// (kernels/activation_and_mul_linear.h). Which of the two a problem takes is measured on its first
// call outside a graph capture, cold and replayed from a device graph as in a decode step: every
// skinny variant that fits, computing the activation, against the two steps (whose linear takes
// its own measured path). A forced
// linear path (kernels/linear_path.h) forces this choice too: "library" the two steps, a variant
// that variant.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/activation_and_mul_linear.h"
#include "kernels/cuda/gemm/cold_timer.h"
#include "kernels/cuda/gemm/measured_device.h"
#include "kernels/cuda/gemm/skinny_gemm.h"
#include "kernels/cuda/gpu_runtime.h"
#include "kernels/linear_path.h"
#include "kernels/measured_choices.h"
#include "runtime/check.h"
#include "runtime/profiler/profiler.h"

namespace tessera::gpu {
namespace {

// What a measured choice depends on: the device, the product's shape and the activation (its
// attributes included: gelu's erf form costs more than its tanh form).
using ChoiceKey =
    std::tuple<int, DType, int64_t, int64_t, int64_t, bool, SkinnyActivation, std::string>;

struct Choices {
  std::mutex mutex;
  std::map<ChoiceKey, const SkinnyVariant*> by_problem;  // nullptr: the two steps
};

Choices& choices() {
  static Choices* instance = new Choices();  // lives until exit: modules unload late
  return *instance;
}

// The stored choice that runs the activation and the linear one after the other.
constexpr char kTwoSteps[] = "two_steps";

// The problem as the measured-choice store keys it (kernels/measured_choices.h): what ChoiceKey
// holds, and the operands' alignments that the variants' fit depends on.
std::string stored_problem(const char* op, const SkinnyProblem& skinny) {
  auto alignment = [](const void* pointer) {
    return reinterpret_cast<uintptr_t>(pointer) % 16 == 0 ? 16 : 0;
  };
  return fmt::format("{} {} m {} n {} k {} bias {} attributes {} align {} {} {}", op,
                     dtype_name(skinny.dtype), skinny.m, skinny.n, skinny.k,
                     skinny.bias != nullptr ? 1 : 0, skinny.attributes.str(), alignment(skinny.x),
                     alignment(skinny.weight), alignment(skinny.activated));
}

// Times the candidates as graph replays, as in a decode step, where a launch costs a node's
// latency and not a stream launch's.
const SkinnyVariant* measure(const char* op, const SkinnyProblem& skinny, const KernelArgs& args,
                             Device device) {
  ColdTimer timer(device);
  std::vector<std::string> timings;
  const KernelArgs unprefetched{args.inputs, args.attributes, args.outputs};  // the paths' own
  const float two_steps_ms = timer.median_graph_ms(
      [&] { run_activation_and_mul_then_linear(op, kGpuDeviceType, unprefetched); },
      TimedAfter::lead_kernel);
  timings.push_back(fmt::format("two steps {:.1f} us", 1e3 * two_steps_ms));
  const SkinnyVariant* best = fastest_skinny_variant(timer, skinny, TimedAfter::lead_kernel,
                                                     SkinnyRule{two_steps_ms}, timings);
  spdlog::debug("{} {} M={} N={} K={}: {}; takes {}", op, dtype_name(skinny.dtype), skinny.m,
                skinny.n, skinny.k, fmt::join(timings, ", "),
                best != nullptr ? best->name : "two steps");
  return best;
}

// The skinny variant that runs the product with the activation, or nullptr for the two steps.
const SkinnyVariant* choose(const char* op, const SkinnyProblem& skinny, const KernelArgs& args,
                            Device device, gpuStream_t stream) {
  if (const std::string* forced = forced_linear_path()) {
    if (library_path_forced()) return nullptr;
    const SkinnyVariant* variant = find_skinny_variant(forced->c_str());
    return variant != nullptr && variant->fits(skinny) ? variant : nullptr;
  }
  const ChoiceKey key{
      device.index, skinny.dtype,           skinny.m,          skinny.n,
      skinny.k,     skinny.bias != nullptr, skinny.activation, skinny.attributes.str()};
  Choices& all = choices();
  {
    std::lock_guard<std::mutex> lock(all.mutex);
    auto found = all.by_problem.find(key);
    if (found != all.by_problem.end()) return found->second;
  }
  // A choice an earlier process measured needs no timing: a capture may take it too.
  const std::string problem = stored_problem(op, skinny);
  if (const std::optional<std::string> stored =
          find_measured_choice(measured_device(device.index), problem)) {
    const SkinnyVariant* variant = find_skinny_variant(stored->c_str());
    if (*stored == kTwoSteps || (variant != nullptr && variant->fits(skinny))) {
      std::lock_guard<std::mutex> lock(all.mutex);
      return all.by_problem.emplace(key, variant).first->second;
    }
    spdlog::warn("measured choices: '{}' is not a choice for {}; measuring again", *stored,
                 problem);
  }
  // Timing synchronizes, which a capture cannot hold: a shape first seen while capturing takes
  // the two steps until a call outside a capture measures it.
  if (stream_capturing(stream)) return nullptr;
  if (std::none_of(skinny_variants().begin(), skinny_variants().end(),
                   [&](const SkinnyVariant& variant) { return variant.fits(skinny); }))
    return nullptr;  // nothing to time against the two steps
  const SkinnyVariant* best = measure(op, skinny, args, device);
  record_measured_choice(measured_device(device.index), problem,
                         best != nullptr ? best->name : kTwoSteps);
  std::lock_guard<std::mutex> lock(all.mutex);
  all.by_problem.emplace(key, best);
  return best;
}

template <const char* kOp, SkinnyActivation kActivation>
void activation_and_mul_linear(const KernelArgs& args) {
  check_activation_and_mul_linear(kOp, args);
  const Tensor& gated = args.inputs[0];
  const Tensor& weight = args.inputs[1];
  const Tensor* bias = args.inputs.size() == 3 ? &args.inputs[2] : nullptr;
  const Tensor& out = args.outputs[0];
  const Tensor& activated = args.outputs[1];
  const int64_t k = activated.sizes().back();
  const int64_t rows = k > 0 ? activated.numel() / k : 0;
  if (rows < 1 || rows > kSkinnyMaxRows || out.numel() == 0)
    return run_activation_and_mul_then_linear(kOp, kGpuDeviceType, args);
  SkinnyProblem skinny =
      gated_linear_problem(gated, weight, bias, out, activated, kActivation, args.attributes);
  LaunchScope scope(out.device());
  const SkinnyVariant* variant = choose(kOp, skinny, args, out.device(), scope.stream());
  // A choice is kept per shape; these operands may still not suit it (alignment).
  if (variant == nullptr || !variant->fits(skinny))
    return run_activation_and_mul_then_linear(kOp, kGpuDeviceType, args);
  skinny.prefetch = l2_prefetch_of(args.prefetch, out.device().index);
  variant->launch(skinny, scope.stream());
  annotate_launch(variant->name);
}

constexpr char kSiluLinear[] = "silu_and_mul_linear";
constexpr char kGeluLinear[] = "gelu_and_mul_linear";
constexpr auto silu_and_mul_linear = activation_and_mul_linear<kSiluLinear, SkinnyActivation::silu>;
constexpr auto gelu_and_mul_linear = activation_and_mul_linear<kGeluLinear, SkinnyActivation::gelu>;
TESSERA_REGISTER_KERNEL(kSiluLinear, kGpuDeviceType, silu_and_mul_linear);
TESSERA_REGISTER_KERNEL(kGeluLinear, kGpuDeviceType, gelu_and_mul_linear);

}  // namespace
}  // namespace tessera::gpu
