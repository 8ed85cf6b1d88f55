// CUDA code generation for fused row kernels: the generated source's shape, NVRTC compiling the
// kernels of real traced graphs (rms_norm, silu_and_mul, softmax, rope decompositions, ...) for
// sm_90 on any machine (NVRTC needs no GPU), the on-disk cubin cache, and on a GPU, compiled
// mode running the NVRTC kernels equal to eager for fused functions and the Llama forward.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "compile/codegen/cuda_codegen.h"
#include "compile/codegen/nvrtc_cache.h"
#include "compile/compiled_function.h"
#include "compile/compiler.h"
#include "compile/ops/ops.h"
#include "compile/passes/passes.h"
#include "engine/generator.h"
#include "kernels/backend.h"
#include "kernels/check.h"

using namespace tessera;
using ::testing::HasSubstr;

namespace {

std::string fresh_cache_dir(const std::string& name) {
  auto path = std::filesystem::temp_directory_path() /
              fmt::format("tessera_test_cuda_cache_{}_{}", name, getpid());
  std::filesystem::remove_all(path);
  return path.string();
}

Tensor random_tensor(Shape sizes, uint32_t seed, DType dtype, Device device) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> values(static_cast<size_t>(shape_numel(sizes)));
  for (float& v : values) v = dist(rng);
  return Tensor::from_floats(values, std::move(sizes), dtype).to(device);
}

Tensor token_ids(int64_t tokens, int64_t limit, Device device) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < tokens; ++i) ids.push_back((i * 37 + tokens * 11 + 5) % limit);
  return Tensor::from_ints(ids, {tokens}).to(device);
}

double relative_error(const Tensor& got, const Tensor& want) {
  std::vector<double> a = got.to_doubles(), b = want.to_doubles();
  if (a.size() != b.size()) return INFINITY;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

double tolerance(DType dtype) {
  return dtype == DType::f32 ? 1e-5 : dtype == DType::f16 ? 4e-3 : 1e-2;
}

// A function made of the row work of an LLM layer; every input's dim 0 is the token count.
struct RowCase {
  std::string name;
  TensorFunction function;
  std::function<std::vector<Tensor>(int64_t tokens)> inputs;
};

std::vector<RowCase> row_cases(DType dtype, Device device) {
  std::vector<RowCase> cases;
  auto x_of = [dtype, device](int64_t width, uint32_t seed) {
    return [=](int64_t tokens) {
      return std::vector<Tensor>{
          random_tensor({tokens, width}, seed + static_cast<uint32_t>(tokens), dtype, device)};
    };
  };
  Tensor norm_weight = random_tensor({256}, 1, dtype, device);
  cases.push_back({"rms_norm",
                   [=](std::span<const Tensor> in) {
                     return std::vector<Tensor>{ops::rms_norm(in[0], norm_weight, 1e-6)};
                   },
                   x_of(256, 10)});
  Tensor wide_weight = random_tensor({2048}, 2, dtype, device);
  cases.push_back({"rms_norm_wide",  // 256 threads, one block-wide reduction
                   [=](std::span<const Tensor> in) {
                     return std::vector<Tensor>{ops::rms_norm(in[0], wide_weight, 1e-6)};
                   },
                   x_of(2048, 20)});
  cases.push_back(
      {"fused_add_rms_norm",
       [=](std::span<const Tensor> in) {
         auto [out, residual] = ops::fused_add_rms_norm(in[0], in[1], norm_weight, 1e-6);
         return std::vector<Tensor>{out, residual};
       },
       [=](int64_t tokens) {
         uint32_t seed = static_cast<uint32_t>(tokens);
         return std::vector<Tensor>{random_tensor({tokens, 256}, 30 + seed, dtype, device),
                                    random_tensor({tokens, 256}, 40 + seed, dtype, device)};
       }});
  Tensor head_weight = random_tensor({64}, 3, dtype, device);
  cases.push_back({"per_head_rms_norm",  // Qwen3's q/k norm: a warp per head
                   [=](std::span<const Tensor> in) {
                     Tensor heads = ops::reshape(in[0], {-1, 8, 64});
                     return std::vector<Tensor>{
                         ops::reshape(ops::rms_norm(heads, head_weight, 1e-6), {-1, 512})};
                   },
                   x_of(512, 50)});
  cases.push_back({"grouped_softmax",  // two long groups per row: block reductions per group
                   [=](std::span<const Tensor> in) {
                     Tensor groups = ops::reshape(in[0], {-1, 2, 1024});
                     return std::vector<Tensor>{ops::reshape(ops::softmax(groups), {-1, 2048})};
                   },
                   x_of(2048, 60)});
  cases.push_back(
      {"silu_and_mul",
       [](std::span<const Tensor> in) { return std::vector<Tensor>{ops::silu_and_mul(in[0])}; },
       x_of(2 * 192, 70)});
  cases.push_back({"gelu_tanh_and_mul",
                   [](std::span<const Tensor> in) {
                     return std::vector<Tensor>{ops::gelu_and_mul(in[0], "tanh")};
                   },
                   x_of(2 * 96, 80)});
  cases.push_back({"softmax_and_max",
                   [](std::span<const Tensor> in) {
                     Tensor scaled = ops::mul_scalar(in[0], 0.5);
                     return std::vector<Tensor>{ops::softmax(scaled), ops::max(in[0], true),
                                                ops::mean(ops::exp(scaled), false)};
                   },
                   x_of(96, 90)});
  Tensor cos_sin = random_tensor({128, 32}, 4, dtype, device);
  for (bool neox : {true, false}) {
    cases.push_back({neox ? "rope_neox" : "rope_gptj",
                     [=](std::span<const Tensor> in) {
                       auto [q, k] = ops::rotary_embedding(in[0], in[1], in[2], cos_sin, 32, neox);
                       return std::vector<Tensor>{q, k};
                     },
                     [=](int64_t tokens) {
                       uint32_t seed = static_cast<uint32_t>(tokens);
                       return std::vector<Tensor>{
                           token_ids(tokens, 128, device),
                           random_tensor({tokens, 4 * 32}, 100 + seed, dtype, device),
                           random_tensor({tokens, 2 * 32}, 110 + seed, dtype, device)};
                     }});
  }
  Tensor table = random_tensor({64, 48}, 5, dtype, device);
  cases.push_back(
      {"embedding_add",
       [=](std::span<const Tensor> in) {
         return std::vector<Tensor>{ops::add(ops::embedding(table, in[0]), in[1])};
       },
       [=](int64_t tokens) {
         return std::vector<Tensor>{
             token_ids(tokens, 64, device),
             random_tensor({tokens, 48}, 120 + static_cast<uint32_t>(tokens), dtype, device)};
       }});
  return cases;
}

std::vector<DynamicDim> token_dims(size_t num_inputs) {
  std::vector<DynamicDim> dims;
  for (size_t i = 0; i < num_inputs; ++i) dims.push_back({i, 0});
  return dims;
}

CustomOpConfig custom_ops_off() {
  return CustomOpConfig::parse({"none"}, false);
}

// The fused kernels of `row_case` traced on the CPU with custom ops decomposed: the passes of
// compile_graph up to codegen (no C++ compiler runs).
CompiledPlan fused_plan(const RowCase& row_case) {
  std::vector<Tensor> inputs = row_case.inputs(8);
  TraceOptions options;
  options.dynamic_dims = token_dims(inputs.size());
  options.custom_ops = custom_ops_off();
  CompiledPlan plan;
  plan.graph = trace(row_case.function, inputs, options).graph;
  CompilationConfig config;
  cleanup(plan.graph, config.pass_config);
  plan.steps = split_into_pieces(plan.graph, config.splitting_ops, &plan.num_pieces);
  fuse(plan, true);
  return plan;
}

}  // namespace

// ---- The generated source (no NVRTC needed) ----

TEST(CudaCodegen, OneBlockPerRowWithSharedReductions) {
  std::vector<RowCase> cases = row_cases(DType::bf16, kCPU);
  CompiledPlan narrow = fused_plan(cases[0]);  // rms_norm over 256
  ASSERT_EQ(narrow.kernels.size(), 1u) << narrow.explain();
  RowKernelBody body = build_row_kernel_body(narrow.graph, narrow.kernels[0]);
  std::string source = generate_cuda_kernel(body);
  EXPECT_EQ(cuda_block_size(body), 128);
  EXPECT_THAT(source, HasSubstr("#define TSR_BLOCK 128"));
  EXPECT_THAT(source, HasSubstr("typedef __nv_bfloat16 tsr_bf16;"));
  EXPECT_THAT(source, HasSubstr("struct tsr_buffers { void* p[3]; };"));  // x, weight, out
  EXPECT_THAT(source, HasSubstr("tessera_kernel(long long rows, tsr_buffers buffers)"));
  EXPECT_THAT(source, HasSubstr("tsr_block_sum<TSR_WARPS>"));
  EXPECT_THAT(source, HasSubstr("const tsr_bf16* __restrict__ in0"));

  CompiledPlan wide = fused_plan(cases[1]);  // rms_norm over 2048
  ASSERT_EQ(wide.kernels.size(), 1u) << wide.explain();
  EXPECT_EQ(cuda_block_size(build_row_kernel_body(wide.graph, wide.kernels[0])), 256);

  CompiledPlan heads = fused_plan(cases[3]);  // 8 heads of 64: a warp per head
  ASSERT_EQ(heads.kernels.size(), 1u) << heads.explain();
  std::string per_head = generate_cuda_kernel(build_row_kernel_body(heads.graph, heads.kernels[0]));
  EXPECT_THAT(per_head, HasSubstr("__shared__ float r0[8];"));
  EXPECT_THAT(per_head, HasSubstr("for (int g = warp; g < 8; g += TSR_WARPS)"));
  EXPECT_THAT(per_head, HasSubstr("tsr_warp_sum(acc)"));
}

// ---- NVRTC on any machine: compile the kernels of real graphs for sm_90 ----

TEST(CudaCodegen, NvrtcCompilesTheFusedKernelsOfTracedGraphs) {
#ifndef TESSERA_CUDA
  GTEST_SKIP() << "built without CUDA (TESSERA_CUDA=OFF): NVRTC is not linked";
#else
  NvrtcKernelCache cache(fresh_cache_dir("sm90"), "sm_90");
  ASSERT_EQ(cache.target(), "sm_90") << "this NVRTC cannot emit sm_90 cubins";
  std::printf("%s, include dir %s\n", NvrtcKernelCache::compiler_identity().c_str(),
              cuda_include_dir().c_str());
  size_t kernels = 0;
  double total_ms = 0;
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    for (const RowCase& row_case : row_cases(dtype, kCPU)) {
      if (dtype == DType::f16 && row_case.name != "rms_norm" && row_case.name != "silu_and_mul")
        continue;
      CompiledPlan plan = fused_plan(row_case);
      EXPECT_FALSE(plan.kernels.empty()) << row_case.name << " fused nothing:\n" << plan.explain();
      for (const FusedKernel& kernel : plan.kernels) {
        std::string source = generate_cuda_kernel(build_row_kernel_body(plan.graph, kernel));
        size_t compiled_before = cache.stats().compiled;
        auto start = std::chrono::steady_clock::now();
        std::string cubin = cache.image(source, kernel.name);
        double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
        ASSERT_GT(cubin.size(), 4u);
        EXPECT_EQ(cubin.compare(0, 4,
                                "\x7f"
                                "ELF"),
                  0)
            << row_case.name << ": not a cubin";
        if (cache.stats().compiled > compiled_before) {
          ++kernels;
          total_ms += ms;
          std::printf("  %-5s %-20s %-28s %zu ops, %6zu-byte cubin, NVRTC %.0f ms\n",
                      dtype_name(dtype), row_case.name.c_str(), kernel.name.c_str(),
                      kernel.nodes.size(), cubin.size(), ms);
        }
      }
    }
  }
  EXPECT_GE(kernels, 20u);
  std::printf("NVRTC compiled %zu kernels for sm_90, %.0f ms per kernel on average\n", kernels,
              total_ms / static_cast<double>(std::max<size_t>(kernels, 1)));
#endif
}

TEST(CudaCodegen, NvrtcCacheSharesReusesAndRebuildsEntries) {
#ifndef TESSERA_CUDA
  GTEST_SKIP() << "built without CUDA (TESSERA_CUDA=OFF): NVRTC is not linked";
#else
  std::string dir = fresh_cache_dir("entries");
  CompiledPlan plan = fused_plan(row_cases(DType::f32, kCPU)[5]);  // silu_and_mul
  ASSERT_EQ(plan.kernels.size(), 1u) << plan.explain();
  // Unique to this test: other tests in this process compile the plain kernel.
  std::string source = generate_cuda_kernel(build_row_kernel_body(plan.graph, plan.kernels[0])) +
                       "// cache entries test\n";

  NvrtcKernelCache cache(dir, "sm_90");
  std::string cubin = cache.image(source, "silu");
  EXPECT_EQ(cache.stats().compiled, 1u);
  // The source is on disk next to the cubin, and a second request shares the first.
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(cache.directory()) /
                                      (cache.key(source) + ".cu")));
  EXPECT_EQ(cache.image(source, "silu"), cubin);
  EXPECT_EQ(cache.stats().memory_hits, 1u);
  EXPECT_EQ(cache.stats().compiled, 1u);

  // What another process left on disk is used as is (a source never compiled here).
  std::string other = source + "// from another process\n";
  std::filesystem::path other_entry =
      std::filesystem::path(cache.directory()) / (cache.key(other) + ".cubin");
  std::ofstream(other_entry, std::ios::binary) << cubin;
  NvrtcKernelCache warm(dir, "sm_90");
  EXPECT_EQ(warm.image(other, "silu"), cubin);
  EXPECT_EQ(warm.stats().disk_hits, 1u);
  EXPECT_EQ(warm.stats().compiled, 0u);

  // A corrupt entry is rebuilt, not trusted, and replaced on disk.
  std::string corrupt = source + "// corrupt entry\n";
  std::filesystem::path corrupt_entry =
      std::filesystem::path(cache.directory()) / (cache.key(corrupt) + ".cubin");
  std::ofstream(corrupt_entry, std::ios::binary) << "not a cubin";
  NvrtcKernelCache rebuilding(dir, "sm_90");
  std::string rebuilt = rebuilding.image(corrupt, "silu");
  EXPECT_EQ(rebuilding.stats().rebuilt, 1u);
  EXPECT_EQ(rebuilding.stats().compiled, 1u);
  EXPECT_EQ(rebuilt.compare(0, 4,
                            "\x7f"
                            "ELF"),
            0);
  EXPECT_EQ(std::filesystem::file_size(corrupt_entry), rebuilt.size());

  // The key covers the target: another architecture is another entry.
  NvrtcKernelCache ampere(dir, "sm_80");
  EXPECT_NE(ampere.key(source), cache.key(source));
#endif
}

TEST(CudaCodegen, NvrtcErrorsNameTheKernelTheSourceAndTheLog) {
#ifndef TESSERA_CUDA
  GTEST_SKIP() << "built without CUDA (TESSERA_CUDA=OFF): NVRTC is not linked";
#else
  NvrtcKernelCache cache(fresh_cache_dir("broken"), "sm_90");
  try {
    cache.image("extern \"C\" __global__ void tessera_kernel() { undeclared_name = 1; }\n",
                "broken_kernel");
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("broken_kernel"));
    EXPECT_THAT(error.what(), HasSubstr(".cu"));
    EXPECT_THAT(error.what(), HasSubstr("undeclared_name"));  // NVRTC's log
    EXPECT_THAT(error.what(), HasSubstr("--gpu-architecture=sm_90"));
  }
  EXPECT_THROW(NvrtcKernelCache(fresh_cache_dir("bad_arch"), "ampere"), Error);
#endif
}

// ---- On a GPU: compiled mode runs the NVRTC kernels ----

namespace {

CompileOptions gpu_compiled_options(const std::string& cache, size_t num_inputs,
                                    std::shared_ptr<const CompiledPlan>* plan) {
  CompilerOptions compiler;
  compiler.config.cache_dir = cache;
  compiler.max_dynamic_size = 64;
  compiler.config.dump_dir =
      std::getenv("TESSERA_TEST_DUMP") ? std::getenv("TESSERA_TEST_DUMP") : "";
  CompileOptions options;
  options.dynamic_dims = token_dims(num_inputs);
  options.custom_ops = custom_ops_off();
  options.backend_function = make_compiled_backend(compiler, [plan](auto p) { *plan = p; });
  return options;
}

}  // namespace

TEST(GpuCompiledMode, FusedRowKernelsMatchEager) {
  Device gpu;
  if (!first_gpu(&gpu) || gpu.type != DeviceType::cuda)
    GTEST_SKIP() << "no CUDA device available (needs a CUDA build and a device)";
  std::string cache = fresh_cache_dir("gpu_rows");
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (const RowCase& row_case : row_cases(dtype, gpu)) {
      SCOPED_TRACE(fmt::format("{} {}", row_case.name, dtype_name(dtype)));
      std::shared_ptr<const CompiledPlan> plan;
      CompiledFunction compiled(row_case.function,
                                gpu_compiled_options(cache, row_case.inputs(1).size(), &plan));
      for (int64_t tokens : {1, 7, 64}) {
        std::vector<Tensor> inputs = row_case.inputs(tokens);
        std::vector<Tensor> got = compiled(inputs), want = row_case.function(inputs);
        ASSERT_EQ(got.size(), want.size());
        for (size_t o = 0; o < want.size(); ++o) {
          EXPECT_EQ(got[o].device(), gpu);
          EXPECT_LT(relative_error(got[o], want[o]), tolerance(dtype))
              << tokens << " tokens, output " << o;
        }
      }
      EXPECT_EQ(compiled.num_compiles(), 1u);
      ASSERT_NE(plan, nullptr);
      EXPECT_FALSE(plan->kernels.empty()) << plan->explain();
      for (const FusedKernel& kernel : plan->kernels) {
        EXPECT_NE(kernel.compiled, nullptr) << kernel.name << " runs op by op";
        EXPECT_THAT(kernel.source, HasSubstr("__global__")) << kernel.name;
      }
      EXPECT_EQ(plan->kernels_compiled + plan->kernels_from_cache, plan->kernels.size());
    }
  }
}

TEST(GpuCompiledMode, LlamaForwardEqualsEager) {
  Device gpu;
  if (!first_gpu(&gpu) || gpu.type != DeviceType::cuda)
    GTEST_SKIP() << "no CUDA device available (needs a CUDA build and a device)";
  for (DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    auto model =
        std::make_shared<const LlamaModel>(load_model("synthetic:qwen3-tiny", {dtype, gpu}), 256);
    RunnerOptions eager_options;
    ModelRunner eager(model, eager_options);
    RunnerOptions compiled_options;
    compiled_options.mode = "compiled";
    compiled_options.compilation.cache_dir = fresh_cache_dir("gpu_llama");
    compiled_options.max_num_batched_tokens = 64;
    compiled_options.custom_ops = custom_ops_off();  // everything fuses
    ModelRunner compiled(model, compiled_options);
    for (int64_t tokens : {1, 7, 64}) {
      std::vector<int32_t> ids;
      for (int64_t i = 0; i < tokens; ++i)
        ids.push_back(static_cast<int32_t>((i * 131 + tokens) % 500 + 3));
      std::vector<int32_t> table_a, table_b;
      ASSERT_TRUE(eager.blocks().ensure_capacity(table_a, tokens));
      ASSERT_TRUE(compiled.blocks().ensure_capacity(table_b, tokens));
      SequenceInput a{ids, 0, table_a}, b{ids, 0, table_b};
      std::vector<float> want = eager.execute(std::span(&a, 1))[0];
      std::vector<float> got = compiled.execute(std::span(&b, 1))[0];
      ASSERT_EQ(got.size(), want.size());
      double diff = 0, norm = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_TRUE(std::isfinite(got[i])) << tokens << " tokens, logit " << i;
        diff += (got[i] - want[i]) * (got[i] - want[i]);
        norm += want[i] * want[i];
      }
      // bf16: the fused kernels keep intermediates in f32 where eager rounds each op's output.
      EXPECT_LT(std::sqrt(diff / norm), dtype == DType::f32 ? 1e-5 : 3e-2) << tokens << " tokens";
      eager.blocks().release(table_a);
      compiled.blocks().release(table_b);
    }
    EXPECT_EQ(compiled.compiled()->num_compiles(), 1u);
    std::shared_ptr<const CompiledPlan> plan = compiled.latest_plan();
    ASSERT_NE(plan, nullptr);
    EXPECT_FALSE(plan->kernels.empty());
    for (const FusedKernel& kernel : plan->kernels)
      EXPECT_NE(kernel.compiled, nullptr) << kernel.name << " runs op by op";
  }
}

#ifdef TESSERA_CUDA
TEST(GpuCompiledMode, WarmStartLoadsAndBadCubinsAreRebuilt) {
  Device gpu;
  if (!first_gpu(&gpu) || gpu.type != DeviceType::cuda)
    GTEST_SKIP() << "no CUDA device available (needs a CUDA build and a device)";
  std::string dir = fresh_cache_dir("gpu_warm");
  RowCase row_case = row_cases(DType::f32, gpu)[0];
  std::vector<Tensor> inputs = row_case.inputs(4);
  TraceOptions trace_options;
  trace_options.dynamic_dims = token_dims(inputs.size());
  trace_options.custom_ops = custom_ops_off();
  Graph graph = trace(row_case.function, inputs, trace_options).graph;
  CompilerOptions options;
  options.config.cache_dir = dir;
  auto cold = compile_graph(graph, options);
  ASSERT_FALSE(cold->kernels.empty());
  auto warm = compile_graph(graph, options);
  EXPECT_EQ(warm->kernels_compiled, 0u);
  EXPECT_EQ(warm->kernels_from_cache, warm->kernels.size());

  // An entry that looks like a cubin but does not load is rebuilt.
  NvrtcKernelCache cache = NvrtcKernelCache::for_device(dir, gpu.index);
  std::string source = cold->kernels[0].source + "// a truncated entry\n";
  std::filesystem::path entry =
      std::filesystem::path(cache.directory()) / (cache.key(source) + ".cubin");
  std::ofstream(entry, std::ios::binary) << std::string(
                                                "\x7f"
                                                "ELF",
                                                4)
                                         << "truncated";
  EXPECT_NE(cache.load(source, "truncated"), nullptr);
  EXPECT_EQ(cache.stats().rebuilt, 1u);
  EXPECT_EQ(cache.stats().compiled, 1u);
}
#endif
