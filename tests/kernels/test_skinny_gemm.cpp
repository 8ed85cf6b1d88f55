// linear at decode sizes on the GPU: every skinny kernel (kernels/cuda/gemm/skinny_gemm.h), forced
// by name, and the per-shape measured choice against the CPU linear kernel on the same values, with
// and without bias, at sizes that leave partial tiles in every dimension. Each variant must run
// (not fall back to the library) on some of the cases, as the step profiler's annotation shows.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "compile/codegen/cache_entry.h"
#include "compile/codegen/measured_choice_files.h"

#include "kernels/linear_path.h"
#include "kernels/measured_choices.h"
#include "runtime/backend/backend.h"
#include "runtime/check.h"
#include "runtime/kernel_registry.h"
#include "runtime/profiler/profiler.h"
#include "support/test_tensors.h"

namespace tessera {
namespace {

struct LinearCase {
  int64_t m, n, k;
};

// Partial tiles: m not a multiple of 8, n of 16, k of the 64-element mma step or the 256-element
// simt step; m up to the skinny limit. 8456 rows are enough 16-row tiles that the mma kernels'
// blocks take several tiles (row warps) beside splits of k, the last block only part of them.
const LinearCase kCases[] = {{1, 40, 64},     {3, 100, 264},  {8, 88, 2048},  {13, 72, 520},
                             {13, 8456, 520}, {64, 96, 1024}, {200, 40, 136}, {256, 24, 72}};

double tolerance(DType dtype) {
  return dtype == DType::f32 ? 1e-5 : dtype == DType::f16 ? 2e-3 : 1e-2;
}

// out = x @ weight^T (+ bias) through the GPU linear kernel; returns the path the launch took
// (the profiler's annotation, e.g. "mma_t1" or "cublaslt").
std::string gpu_linear(const Tensor& x, const Tensor& weight, const Tensor* bias, Tensor& out,
                       bool follows_splitting_op = false) {
  std::vector<Tensor> inputs{x, weight};
  if (bias != nullptr) inputs.push_back(*bias);
  KernelProfiler profiler(x.device(), /*timing=*/true);
  {
    ProfilerScope active(profiler);
    profiler.start();
    ProfiledLaunch launch("linear", KernelClass::gemm);
    run_kernel("linear", x.device().type,
               KernelArgs{inputs, Attributes{}, std::span(&out, 1), nullptr, follows_splitting_op});
  }
  profiler.stop();
  const std::string& name = profiler.launches().at(0).name;
  const size_t open = name.find('[');
  return open == std::string::npos ? "" : name.substr(open + 1, name.size() - open - 2);
}

Tensor cpu_linear(const Tensor& x, const Tensor& weight, const Tensor* bias) {
  std::vector<Tensor> inputs{x.to(kCPU), weight.to(kCPU)};
  if (bias != nullptr) inputs.push_back(bias->to(kCPU));
  Tensor out = Tensor::empty({x.size(0), weight.size(0)}, x.dtype(), kCPU);
  run_kernel("linear", DeviceType::cpu, KernelArgs{inputs, Attributes{}, std::span(&out, 1)});
  return out;
}

// Runs every case in `dtype` under `path`, checks each against the CPU kernel; returns how many
// cases ran on `path` itself, and adds the paths they ran on to `took_paths` (when given).
int check_path(Device gpu, const std::string& path, DType dtype,
               std::set<std::string>* took_paths = nullptr) {
  ForceLinearPath forced(path);
  int ran = 0;
  uint32_t seed = 1;
  for (const LinearCase& c : kCases) {
    for (bool with_bias : {false, true}) {
      const Tensor x = testing::random_tensor({c.m, c.k}, seed++, dtype, gpu);
      const Tensor weight = testing::random_tensor({c.n, c.k}, seed++, dtype, gpu);
      const Tensor bias = testing::random_tensor({c.n}, seed++, dtype, gpu);
      Tensor out = Tensor::empty({c.m, c.n}, dtype, gpu);
      const std::string took = gpu_linear(x, weight, with_bias ? &bias : nullptr, out);
      ran += took == path;
      if (took_paths != nullptr) took_paths->insert(took);
      const Tensor want = cpu_linear(x, weight, with_bias ? &bias : nullptr);
      EXPECT_LE(testing::relative_error(out.to(kCPU), want), tolerance(dtype))
          << path << " " << dtype_name(dtype) << " m=" << c.m << " n=" << c.n << " k=" << c.k
          << (with_bias ? " with bias" : "") << " ran on " << took;
    }
  }
  return ran;
}

TEST(GpuSkinnyGemm, EveryVariantMatchesTheCpuKernelAndRuns) {
  Device gpu;
  if (!first_gpu(&gpu)) GTEST_SKIP() << "no GPU";
  const std::vector<std::string> variants = linear_variants(gpu.type);
  ASSERT_FALSE(variants.empty());
  for (const std::string& variant : variants) {
    int ran = 0;
    for (DType dtype : {DType::bf16, DType::f16, DType::f32})
      ran += check_path(gpu, variant, dtype);
    EXPECT_GT(ran, 0) << variant << " never ran: every case fell back to the library";
  }
}

TEST(GpuSkinnyGemm, LibraryAndMeasuredChoiceMatchTheCpuKernel) {
  Device gpu;
  if (!first_gpu(&gpu)) GTEST_SKIP() << "no GPU";
  for (const char* path : {kLinearPathLibrary, kLinearPathMeasured})
    for (DType dtype : {DType::bf16, DType::f32}) check_path(gpu, path, dtype);
}

// library:N runs the library's N-th heuristic algorithm (its last where it offers fewer), and
// every one is right; some of these shapes offer several (the measured path times them all, and
// a test of it can only see that its choice is right, above).
TEST(GpuSkinnyGemm, EveryLibraryAlgorithmMatchesTheCpuKernel) {
  Device gpu;
  if (!first_gpu(&gpu)) GTEST_SKIP() << "no GPU";
  std::set<std::string> took;
  for (int n = 1; n <= kLibraryAlgorithms; ++n)
    for (DType dtype : {DType::bf16, DType::f32})
      check_path(gpu, fmt::format("{}:{}", kLinearPathLibrary, n), dtype, &took);
  EXPECT_TRUE(took.contains("cublaslt:1") && took.contains("cublaslt:2"))
      << "ran on: " << fmt::format("{}", fmt::join(took, ", "));
  // GemmEx ("cublas") runs what Lt has no algorithm for; nothing else may.
  for (const std::string& path : took)
    EXPECT_TRUE(path.starts_with("cublaslt:") || path == "cublas") << path;
}

// Captures what spdlog's default logger writes, at debug level, while it lives.
class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1024)) {
    spdlog::default_logger()->sinks().push_back(sink_);
    level_ = spdlog::default_logger()->level();
    spdlog::default_logger()->set_level(spdlog::level::debug);
  }
  ~LogCapture() {
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::find(sinks.begin(), sinks.end(), sink_));
    spdlog::default_logger()->set_level(level_);
  }
  bool contains(const std::string& text) const {
    for (const std::string& line : sink_->last_formatted())
      if (line.find(text) != std::string::npos) return true;
    return false;
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  spdlog::level::level_enum level_;
};

// The one store file under `cache_dir` (this process has one GPU module and measures on one
// device), as its lines.
std::vector<std::string> store_lines(const std::string& cache_dir, std::string* path) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(cache_dir + "/measured"))
    if (entry.path().extension() == ".choices") files.push_back(entry.path().string());
  EXPECT_EQ(files.size(), 1u);
  if (files.empty()) return {};
  *path = files[0];
  const std::optional<std::string> payload = read_cache_entry(files[0]);
  EXPECT_TRUE(payload.has_value()) << files[0];
  std::vector<std::string> lines;
  for (size_t start = 0; payload && start < payload->size();) {
    const size_t end = std::min(payload->find('\n', start), payload->size());
    lines.push_back(payload->substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// The stored choice of the line whose problem starts with `problem`, or "".
std::string stored_choice_of(const std::vector<std::string>& lines, const std::string& problem) {
  for (const std::string& line : lines)
    if (line.starts_with(problem)) return line.substr(line.find('\t') + 1);
  return "";
}

// A linear's measured path is stored in the cache directory (kernels/measured_choices.h); a
// stored path is taken back without timing; one that cannot run the problem is measured again
// and replaced.
TEST(GpuSkinnyGemm, MeasuredPathsAreStoredAndTakenBack) {
  Device gpu;
  if (!first_gpu(&gpu)) GTEST_SKIP() << "no GPU";
  const std::string dir = testing::fresh_temp_dir("skinny_measured_paths");
  use_measured_choice_files(dir);
  const int64_t n = 56, k = 776;
  auto run = [&](int64_t m, uint32_t seed) {
    const Tensor x = testing::random_tensor({m, k}, seed, DType::bf16, gpu);
    const Tensor weight = testing::random_tensor({n, k}, seed + 1, DType::bf16, gpu);
    Tensor out = Tensor::empty({m, n}, DType::bf16, gpu);
    const std::string took = gpu_linear(x, weight, nullptr, out);
    EXPECT_LE(testing::relative_error(out.to(kCPU), cpu_linear(x, weight, nullptr)),
              tolerance(DType::bf16))
        << "m=" << m << " ran on " << took;
    return took;
  };
  auto problem = [&](int64_t m) {
    return fmt::format("linear bf16 b_transposed 1 m {} n {} k {} ", m, n, k);
  };

  // Measured, and stored as "<path> algorithm <N>".
  const std::string took = run(5, 11);
  std::string path;
  std::vector<std::string> lines = store_lines(dir, &path);
  const std::string stored = stored_choice_of(lines, problem(5));
  EXPECT_TRUE(stored.starts_with(took + " algorithm ")) << stored << " / ran on " << took;

  // Seeded choices for two more shapes (the same operands' layout: only m differs): one that
  // runs, one that cannot (simt_r16 takes at most 4 rows).
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  std::string seeded_6 = lines.back(), seeded_7 = lines.back();
  for (const std::string& line : lines)
    if (line.starts_with(problem(5))) seeded_6 = seeded_7 = line.substr(0, line.find('\t'));
  seeded_6.replace(0, problem(5).size(), problem(6));
  seeded_7.replace(0, problem(5).size(), problem(7));
  text += seeded_6 + "\tsimt_r2 algorithm 1\n" + seeded_7 + "\tsimt_r16 algorithm 1\n";
  write_cache_entry(path, text);
  use_measured_choice_files(testing::fresh_temp_dir("skinny_measured_paths_elsewhere"));
  use_measured_choice_files(dir);  // read afresh, as a new process would
  {
    LogCapture log;
    EXPECT_EQ(run(6, 21), "simt_r2");
    EXPECT_FALSE(log.contains("M=6 N=56 K=776")) << "the stored path was timed again";
    run(7, 31);
    EXPECT_TRUE(log.contains("'simt_r16 algorithm 1' is not a choice for linear bf16 M=7"));
    EXPECT_TRUE(log.contains("M=7 N=56 K=776")) << "the unusable stored path was not measured";
  }
  lines = store_lines(dir, &path);
  const std::string replaced = stored_choice_of(lines, problem(7));
  EXPECT_FALSE(replaced.empty());
  EXPECT_FALSE(replaced.starts_with("simt_r16")) << replaced;
  EXPECT_EQ(stored_choice_of(lines, problem(6)), "simt_r2 algorithm 1");
  set_measured_choice_store(nullptr);
}

// A linear right after a splitting op (KernelArgs::follows_splitting_op, set by the compiler for
// the o projection after the attention) times its paths alone, not behind the lead kernel, and
// keeps its choice apart from the same shape elsewhere: two measurements, two stored lines.
TEST(GpuSkinnyGemm, ALinearAfterASplittingOpIsTimedAloneAndChosenApart) {
  Device gpu;
  if (!first_gpu(&gpu)) GTEST_SKIP() << "no GPU";
  const std::string dir = testing::fresh_temp_dir("skinny_follows_splitting");
  use_measured_choice_files(dir);
  const int64_t m = 9, n = 56, k = 776;
  const Tensor x = testing::random_tensor({m, k}, 41, DType::bf16, gpu);
  const Tensor weight = testing::random_tensor({n, k}, 42, DType::bf16, gpu);
  // After a splitting op, elsewhere, then after one again (taken from its plan, not measured).
  const bool contexts[] = {true, false, true};
  for (size_t call = 0; call < std::size(contexts); ++call) {
    const bool follows = contexts[call];
    const bool first_of_its_context = call < 2;
    LogCapture log;
    Tensor out = Tensor::empty({m, n}, DType::bf16, gpu);
    const std::string took = gpu_linear(x, weight, nullptr, out, follows);
    EXPECT_LE(testing::relative_error(out.to(kCPU), cpu_linear(x, weight, nullptr)),
              tolerance(DType::bf16))
        << "ran on " << took;
    EXPECT_EQ(log.contains("M=9 N=56 K=776 after a splitting op (timed alone):"),
              follows && first_of_its_context);
    EXPECT_EQ(log.contains("M=9 N=56 K=776:"), !follows && first_of_its_context);
  }
  std::string path;
  const std::vector<std::string> lines = store_lines(dir, &path);
  int alone = 0, behind_lead = 0;
  for (const std::string& line : lines) {
    if (!line.starts_with(fmt::format("linear bf16 b_transposed 1 m {} n {} k {} ", m, n, k)))
      continue;
    alone += line.find(" follows_splitting_op 1 ") != std::string::npos;
    behind_lead += line.find(" follows_splitting_op 0 ") != std::string::npos;
  }
  EXPECT_EQ(alone, 1);
  EXPECT_EQ(behind_lead, 1);
  set_measured_choice_store(nullptr);
}

TEST(LinearPath, LibraryAlgorithmsAreNamedFromOne) {
  EXPECT_FALSE(library_path_forced());
  EXPECT_EQ(forced_library_algorithm(), 0);
  {
    ForceLinearPath third("library:3");
    EXPECT_TRUE(library_path_forced());
    EXPECT_EQ(forced_library_algorithm(), 3);
    ForceLinearPath library(kLinearPathLibrary);
    EXPECT_TRUE(library_path_forced());
    EXPECT_EQ(forced_library_algorithm(), 0);
  }
  EXPECT_FALSE(library_path_forced());
  for (const char* bad : {"library:0", "library:9", "library:", "library:12", "library:x"}) {
    try {
      ForceLinearPath forced(bad);
      FAIL() << bad << " was accepted";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("library:1 .. library:8"), std::string::npos)
          << error.what();
    }
  }
}

// What `tessera bench sweep --linear` checks a name against: the builtin paths everywhere, a
// skinny variant only on the device type that registered it.
TEST(LinearPath, NamesAreCheckedPerDeviceType) {
  for (const char* path : {kLinearPathMeasured, kLinearPathLibrary, "library:1", "library:8"})
    EXPECT_TRUE(is_linear_path(path, DeviceType::cpu)) << path;
  for (const char* path : {"library:9", "library:", "fastest", ""})
    EXPECT_FALSE(is_linear_path(path, DeviceType::cpu)) << path;
  EXPECT_EQ(linear_path_names(DeviceType::cpu),
            (std::vector<std::string>{"measured", "library", "library:1 .. library:8"}));
  // A GPU module's variants count on its device type only (the CPU has none).
  for (const std::string& variant : linear_variants(DeviceType::cuda)) {
    EXPECT_TRUE(is_linear_path(variant, DeviceType::cuda)) << variant;
    EXPECT_FALSE(is_linear_path(variant, DeviceType::cpu)) << variant;
  }
}

TEST(LinearPath, UnknownNamesAreErrorsListingTheChoices) {
  try {
    ForceLinearPath forced("fastest");
    FAIL() << "an unknown path was accepted";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("'fastest'"), std::string::npos) << message;
    EXPECT_NE(message.find("measured, library"), std::string::npos) << message;
  }
  EXPECT_EQ(forced_linear_path(), nullptr);
  {
    ForceLinearPath library(kLinearPathLibrary);
    ASSERT_NE(forced_linear_path(), nullptr);
    EXPECT_EQ(*forced_linear_path(), kLinearPathLibrary);
    ForceLinearPath measured(kLinearPathMeasured);
    EXPECT_EQ(forced_linear_path(), nullptr);
  }
  EXPECT_EQ(forced_linear_path(), nullptr);
}

}  // namespace
}  // namespace tessera
