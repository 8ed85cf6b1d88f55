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

#include "compile/codegen/cache_entry.h"
#include "compile/codegen/cpp_codegen.h"
#include "compile/codegen/cuda_codegen.h"
#include "compile/codegen/gpu_kernel_cache.h"
#include "compile/codegen/kernel_cache.h"
#include "compile/compiled_function.h"
#include "compile/compiler.h"
#include "compile/ops/ops.h"
#include "engine/generator.h"
#include "engine/runner/run_setup.h"
#include "models/architecture_registry.h"
#include "runtime/backend/backend.h"
#include "runtime/check.h"
#include "support/broken_kernel.h"
#include "support/compile_options.h"
#include "support/row_cases.h"
#include "support/runner_steps.h"
#include "support/test_tensors.h"

using namespace tessera;
using namespace tessera::testing;
using ::testing::HasSubstr;

namespace {

double tolerance(DType dtype) {
  return dtype == DType::f32 ? 1e-5 : dtype == DType::f16 ? 4e-3 : 1e-2;
}

// rms_norm and silu_and_mul over rows of `width` outputs: the vector path needs width to be a
// multiple of 16 bytes of the output dtype (2048), the scalar path takes the rest (33).
RowCase rms_norm_of_width(int64_t width, DType dtype, Device device) {
  Tensor weight = random_tensor({width}, 6, dtype, device);
  return {fmt::format("rms_norm_{}", width),
          [=](std::span<const Tensor> in) {
            return std::vector<Tensor>{ops::rms_norm(in[0], weight, 1e-6)};
          },
          [=](int64_t tokens) {
            return std::vector<Tensor>{
                random_tensor({tokens, width}, 200 + static_cast<uint32_t>(tokens), dtype, device)};
          }};
}

RowCase silu_and_mul_of_width(int64_t width, DType dtype, Device device) {
  return {fmt::format("silu_and_mul_{}", width),
          [](std::span<const Tensor> in) { return std::vector<Tensor>{ops::silu_and_mul(in[0])}; },
          [=](int64_t tokens) {
            return std::vector<Tensor>{random_tensor(
                {tokens, 2 * width}, 300 + static_cast<uint32_t>(tokens), dtype, device)};
          }};
}

// rope (NeoX halves) of `heads` q heads and `kv_heads` k heads of `head_size`, as a decode step
// of a Llama traces it: rows of heads * head_size (q) and kv_heads * head_size (k).
RowCase rope_of_width(int64_t heads, int64_t kv_heads, int64_t head_size, DType dtype,
                      Device device) {
  Tensor cos_sin = random_tensor({128, head_size}, 7, dtype, device);
  return {fmt::format("rope_{}x{}", heads, head_size),
          [=](std::span<const Tensor> in) {
            auto [q, k] = ops::rotary_embedding(in[0], in[1], in[2], cos_sin, head_size, true);
            return std::vector<Tensor>{q, k};
          },
          [=](int64_t tokens) {
            const auto seed = static_cast<uint32_t>(tokens);
            return std::vector<Tensor>{
                token_ids(tokens, 128, device),
                random_tensor({tokens, heads * head_size}, 400 + seed, dtype, device),
                random_tensor({tokens, kv_heads * head_size}, 410 + seed, dtype, device)};
          }};
}

// Reads of x the vectorizer must leave scalar (an unaligned slice start, a transpose: stride 32)
// next to a read of y it vectorizes.
std::vector<RowCase> strided_row_cases(DType dtype, Device device) {
  std::vector<RowCase> cases;
  auto x_and_y = [=](int64_t x_width, uint32_t seed) {
    return [=](int64_t tokens) {
      uint32_t token_seed = seed + static_cast<uint32_t>(tokens);
      return std::vector<Tensor>{random_tensor({tokens, x_width}, token_seed, dtype, device),
                                 random_tensor({tokens, 512}, token_seed + 50, dtype, device)};
    };
  };
  cases.push_back({"slice_from_3",
                   [](std::span<const Tensor> in) {
                     Tensor x = ops::slice(in[0], 1, 3, 3 + 512);
                     return std::vector<Tensor>{ops::mul(ops::silu(x), in[1])};
                   },
                   x_and_y(520, 400)});
  cases.push_back({"transpose",
                   [](std::span<const Tensor> in) {
                     Tensor heads = ops::reshape(in[0], {-1, 16, 32});
                     Tensor swapped = ops::reshape(ops::transpose(heads, 1, 2), {-1, 512});
                     return std::vector<Tensor>{ops::add(ops::mul_scalar(swapped, 3.0), in[1])};
                   },
                   x_and_y(512, 500)});
  return cases;
}

// The tensors a fused kernel reads: the plan's placeholders and constants.
std::vector<Tensor> kernel_inputs(const CompiledPlan& plan, const FusedKernel& kernel,
                                  const std::vector<Tensor>& inputs) {
  std::vector<Tensor> tensors;
  for (int id : kernel.inputs) {
    const Node& node = plan.graph.nodes()[plan.graph.value(id).producer];
    if (node.kind == NodeKind::placeholder) {
      tensors.push_back(inputs[node.input_index].contiguous());
    } else {
      TESSERA_CHECK(node.kind == NodeKind::constant, "{} reads value {}, computed outside it",
                    kernel.name, id);
      tensors.push_back(node.constant.contiguous());
    }
  }
  return tensors;
}

// A C++ kernel computing each output element both ways: from its scalar expression and from its
// vector form as the CUDA vector loop would (the group's lanes loaded from the first lane's
// offset, which must be a multiple of the lanes), NaN where they differ.
std::string vector_form_check_kernel(RowKernelBody body) {
  for (RowOutput& out : body.outputs) {
    if (out.vector.lanes == 0) continue;
    std::string lambda = "([&](int64_t tsr_first, int64_t tsr_lane) -> float {\n";
    for (const RowVectorLoad& load : out.vector.loads)
      lambda += fmt::format("  float {}[{}];\n", load.array, out.vector.lanes);
    lambda += "  {\n    const int64_t i = tsr_first;\n";
    for (const RowVectorLoad& load : out.vector.loads)
      lambda += fmt::format("    tsr_ldv(in{}, {}, {});\n", load.input, load.offset, load.array);
    lambda += "  }\n  const int64_t i = tsr_first + tsr_lane;\n  (void)i;\n";
    lambda += fmt::format("  return {0};\n}})(i - i % {1}, i % {1})", out.vector.element,
                          out.vector.lanes);
    out.element = fmt::format("tsr_same({}, {})", out.element, lambda);
  }
  std::string source = generate_cpp_kernel(body, "vector_form_check");
  const std::string helpers = R"(
template <typename T, int kLanes>
static inline void tsr_ldv(const T* p, int64_t i, float (&v)[kLanes]) {
  for (int lane = 0; lane < kLanes; ++lane) v[lane] = i % kLanes == 0 ? tsr_ld(p, i + lane) : NAN;
}
static inline float tsr_same(float scalar, float vector) {
  return std::fabs(scalar - vector) <= 1e-6f * std::fmax(1.0f, std::fabs(scalar)) ? scalar : NAN;
}
)";
  size_t kernel = source.find("extern \"C\"");
  TESSERA_CHECK(kernel != std::string::npos, "no kernel in the generated C++");
  source.insert(kernel, helpers);
  return source;
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

// Kernels that reduce over a row take one block per row; pointwise kernels split long rows
// (one row of 128256 logits would otherwise be one block on the whole GPU), by 16-byte groups
// per thread where the row has the vector form and by elements where it does not (40001).
TEST(CudaCodegen, PointwiseKernelsSplitLongRowsOverBlocks) {
  for (int64_t width : {33, 2048, 40000, 40001}) {
    SCOPED_TRACE(width);
    CompiledPlan norm = fused_plan(rms_norm_of_width(width, DType::bf16, kCPU));
    CompiledPlan silu = fused_plan(silu_and_mul_of_width(width, DType::bf16, kCPU));
    ASSERT_EQ(norm.kernels.size(), 1u);
    ASSERT_EQ(silu.kernels.size(), 1u);
    EXPECT_EQ(cuda_blocks_per_row(build_row_kernel_body(norm.graph, norm.kernels[0])), 1);
    // 256 threads x 8 elements per block for rows of 1024 elements or more; x 1 without the
    // vector form.
    EXPECT_EQ(cuda_blocks_per_row(build_row_kernel_body(silu.graph, silu.kernels[0])),
              width == 40001   ? 157
              : width == 40000 ? 20
                               : 1);
  }
  // A decode step's rope at Llama-3.2-1B's width (q 2048, k 512), which has no vector form: one
  // element per thread, 8 blocks of 256 per row (one block took a whole batch-1 row).
  CompiledPlan rope = fused_plan(rope_of_width(32, 8, 64, DType::bf16, kCPU));
  ASSERT_EQ(rope.kernels.size(), 1u) << rope.explain();
  EXPECT_EQ(cuda_blocks_per_row(build_row_kernel_body(rope.graph, rope.kernels[0])), 8);
}

TEST(CudaCodegen, VectorAccessWhereTheRowAllows) {
#ifdef TESSERA_CUDA
  GpuKernelCache cubins(fresh_temp_dir("cuda_cache_vector_cubins"), DeviceType::cuda, "sm_90");
  // An architecture past NVRTC's newest compiles to PTX, where the accesses' widths show.
  GpuKernelCache ptx(fresh_temp_dir("cuda_cache_vector_ptx"), DeviceType::cuda, "sm_999");
  ASSERT_EQ(ptx.target().rfind("compute_", 0), 0u) << ptx.target();
#endif
  for (DType dtype : {DType::bf16, DType::f32}) {
    const int64_t lanes = dtype == DType::bf16 ? 8 : 4;  // 16 bytes of outputs
    for (int64_t width : {2048, 33}) {
      for (const RowCase& row_case :
           {rms_norm_of_width(width, dtype, kCPU), silu_and_mul_of_width(width, dtype, kCPU)}) {
        SCOPED_TRACE(fmt::format("{} {}", row_case.name, dtype_name(dtype)));
        CompiledPlan plan = fused_plan(row_case);
        ASSERT_EQ(plan.kernels.size(), 1u) << plan.explain();
        RowKernelBody body = build_row_kernel_body(plan.graph, plan.kernels[0]);
        ASSERT_EQ(body.outputs.size(), 1u);
        const RowVectorForm& vector = body.outputs[0].vector;
        std::string source = generate_cuda_kernel(body);
#ifdef TESSERA_CUDA
        std::string cubin = cubins.image(source, row_case.name);
        EXPECT_EQ(cubin.compare(0, 4,
                                "\x7f"
                                "ELF"),
                  0);
        std::string assembly = ptx.image(source, row_case.name);
        // 16-byte stores and loads (ld.global.nc.v4 for sm_90, ld.global.v4 for newer targets).
        EXPECT_EQ(assembly.find("st.global.v4.") != std::string::npos, width == 2048);
        EXPECT_EQ(assembly.find("ld.global.v4.") != std::string::npos ||
                      assembly.find("ld.global.nc.v4.") != std::string::npos,
                  width == 2048);
#endif
        if (width == 33) {
          EXPECT_EQ(vector.lanes, 0);
          EXPECT_THAT(source, ::testing::Not(HasSubstr("tsr_stv(out0")));
          EXPECT_THAT(source, ::testing::Not(HasSubstr("tsr_ldv(in")));
          EXPECT_THAT(source, HasSubstr("for (int i = tsr_part * TSR_BLOCK + threadIdx.x; i < 33; "
                                        "i += TSR_ROW_BLOCKS * TSR_BLOCK)"));
          continue;
        }
        EXPECT_EQ(vector.lanes, lanes);
        // rms_norm reads x and the weight, silu_and_mul both halves of its input, each as vectors.
        ASSERT_EQ(vector.loads.size(), 2u) << vector.element;
        EXPECT_NE(vector.loads[0].offset, vector.loads[1].offset);
        EXPECT_THAT(vector.element, ::testing::Not(HasSubstr("tsr_ld(")));
        EXPECT_THAT(source, HasSubstr(fmt::format(
                                "for (int tsr_first = {0} * (tsr_part * TSR_BLOCK + threadIdx.x); "
                                "tsr_first < 2048; tsr_first += {0} * TSR_ROW_BLOCKS * TSR_BLOCK)",
                                lanes)));
        EXPECT_THAT(source,
                    HasSubstr("tsr_stv(out0, row * 2048 + tsr_first, tsr_out, tsr_aligned);"));
        EXPECT_THAT(source, HasSubstr(fmt::format("tsr_ldv(in{}, ", vector.loads[0].input)));
        // Buffers that fail the run-time alignment test are accessed element by element.
        EXPECT_THAT(source, HasSubstr("const bool tsr_aligned = (((unsigned long long)out0 & 15)"));
        EXPECT_THAT(source, ::testing::Not(HasSubstr("i < 2048; i += TSR_ROW_BLOCKS")));
      }
    }
  }
  // Reads that are not unit-stride from an aligned offset stay scalar next to vector reads.
  for (const RowCase& row_case : strided_row_cases(DType::bf16, kCPU)) {
    SCOPED_TRACE(row_case.name);
    CompiledPlan plan = fused_plan(row_case);
    ASSERT_EQ(plan.kernels.size(), 1u) << plan.explain();
    RowKernelBody body = build_row_kernel_body(plan.graph, plan.kernels[0]);
    const RowVectorForm& vector = body.outputs[0].vector;
    EXPECT_EQ(vector.lanes, 8);
    ASSERT_EQ(vector.loads.size(), 1u) << vector.element;
    int strided_input = 1 - vector.loads[0].input;  // the other of the kernel's two inputs
    EXPECT_THAT(vector.element, HasSubstr(fmt::format("tsr_ld(in{}, ", strided_input)));
  }
  // rope reads its inputs in cat branches: no read is vectorized, so no output is.
  for (const RowCase& row_case : row_cases(DType::bf16, kCPU)) {
    if (row_case.name != "rope_neox" && row_case.name != "rope_gptj") continue;
    SCOPED_TRACE(row_case.name);
    CompiledPlan plan = fused_plan(row_case);
    for (const FusedKernel& kernel : plan.kernels) {
      const RowKernelBody body = build_row_kernel_body(plan.graph, kernel);
      int64_t widest = 0;
      for (const RowOutput& out : body.outputs) {
        EXPECT_EQ(out.vector.lanes, 0) << out.vector.element;
        widest = std::max(widest, out.row_elements);
      }
      // So a row is split over blocks by elements: one per thread (a decode step's rope would
      // otherwise run on one block per row, each thread waiting on several elements in turn).
      const int64_t threads = cuda_block_size(body);
      EXPECT_EQ(cuda_blocks_per_row(body), std::min<int64_t>((widest + threads - 1) / threads, 256))
          << widest << " elements";
    }
  }
}

// The vector forms of every row case, run on the CPU as the CUDA vector loop runs them: each
// output element equals its scalar expression, and every vector load starts at a multiple of the
// lanes (the CUDA alignment the vector path relies on).
TEST(CudaCodegen, VectorFormsComputeTheScalarElements) {
  CpuKernelCache cache(fresh_temp_dir("cuda_cache_vector_forms"));
  size_t vector_outputs = 0, vector_loads = 0;
  for (DType dtype : {DType::bf16, DType::f32}) {
    std::vector<RowCase> cases = row_cases(dtype, kCPU);
    for (RowCase& extra : strided_row_cases(dtype, kCPU)) cases.push_back(std::move(extra));
    cases.push_back(silu_and_mul_of_width(2048, dtype, kCPU));
    for (const RowCase& row_case : cases) {
      SCOPED_TRACE(fmt::format("{} {}", row_case.name, dtype_name(dtype)));
      CompiledPlan plan = fused_plan(row_case);
      std::vector<Tensor> inputs = row_case.inputs(3);
      for (const FusedKernel& kernel : plan.kernels) {
        RowKernelBody body = build_row_kernel_body(plan.graph, kernel);
        for (const RowOutput& out : body.outputs) {
          vector_outputs += out.vector.lanes > 0;
          vector_loads += out.vector.loads.size();
        }
        auto function = reinterpret_cast<CpuKernelFunction>(
            cache.load(vector_form_check_kernel(body), kernel.name));
        std::vector<Tensor> tensors = kernel_inputs(plan, kernel, inputs);
        std::vector<void*> buffers;
        for (const Tensor& t : tensors) buffers.push_back(t.data_ptr());
        std::vector<Tensor> outputs;
        for (int id : kernel.outputs) {
          const TensorMeta& meta = plan.graph.value(id).meta;
          Shape sizes{3};
          for (size_t d = 1; d < meta.shape.size(); ++d) sizes.push_back(meta.shape[d].constant());
          outputs.push_back(Tensor::empty(sizes, meta.dtype, kCPU));
          buffers.push_back(outputs.back().data_ptr());
        }
        function(0, 3, buffers.data());
        for (size_t o = 0; o < outputs.size(); ++o) {
          std::vector<double> values = outputs[o].to_doubles();
          size_t mismatches = 0;
          for (double v : values) mismatches += std::isnan(v);
          EXPECT_EQ(mismatches, 0u) << kernel.name << " output " << o << " of " << values.size()
                                    << " elements: " << body.outputs[o].vector.element;
        }
      }
    }
  }
  EXPECT_GE(vector_outputs, 20u);
  EXPECT_GE(vector_loads, 30u);

  // The check itself: a vector form whose loads start one element late is caught.
  CompiledPlan plan = fused_plan(silu_and_mul_of_width(2048, DType::f32, kCPU));
  RowKernelBody body = build_row_kernel_body(plan.graph, plan.kernels[0]);
  ASSERT_FALSE(body.outputs[0].vector.loads.empty());
  body.outputs[0].vector.loads[0].offset += " + 4";  // still aligned, the wrong elements
  auto function = reinterpret_cast<CpuKernelFunction>(
      cache.load(vector_form_check_kernel(body), "shifted_vector_load"));
  std::vector<Tensor> inputs = silu_and_mul_of_width(2048, DType::f32, kCPU).inputs(3);
  Tensor out = Tensor::empty({3, 2048}, DType::f32, kCPU);
  std::vector<void*> buffers{inputs[0].data_ptr(), out.data_ptr()};
  function(0, 3, buffers.data());
  size_t mismatches = 0;
  for (double v : out.to_doubles()) mismatches += std::isnan(v);
  EXPECT_GT(mismatches, 3000u);
}

// ---- NVRTC on any machine: compile the kernels of real graphs for sm_90 ----

TEST(CudaCodegen, NvrtcCompilesTheFusedKernelsOfTracedGraphs) {
#ifndef TESSERA_CUDA
  GTEST_SKIP() << "built without CUDA (TESSERA_CUDA=OFF): NVRTC is not linked";
#else
  GpuKernelCache cache(fresh_temp_dir("cuda_cache_sm90"), DeviceType::cuda, "sm_90");
  ASSERT_EQ(cache.target(), "sm_90") << "this NVRTC cannot emit sm_90 cubins";
  std::printf("%s\n", cache.compiler_identity().c_str());
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
  std::string dir = fresh_temp_dir("cuda_cache_entries");
  CompiledPlan plan = fused_plan(row_cases(DType::f32, kCPU)[5]);  // silu_and_mul
  ASSERT_EQ(plan.kernels.size(), 1u) << plan.explain();
  // Unique to this test: other tests in this process compile the plain kernel.
  std::string source = generate_cuda_kernel(build_row_kernel_body(plan.graph, plan.kernels[0])) +
                       "// cache entries test\n";

  GpuKernelCache cache(dir, DeviceType::cuda, "sm_90");
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
  write_cache_entry(other_entry.string(), cubin);
  GpuKernelCache warm(dir, DeviceType::cuda, "sm_90");
  EXPECT_EQ(warm.image(other, "silu"), cubin);
  EXPECT_EQ(warm.stats().disk_hits, 1u);
  EXPECT_EQ(warm.stats().compiled, 0u);

  // A corrupt entry is rebuilt, not trusted, and replaced on disk.
  std::string corrupt = source + "// corrupt entry\n";
  std::filesystem::path corrupt_entry =
      std::filesystem::path(cache.directory()) / (cache.key(corrupt) + ".cubin");
  std::ofstream(corrupt_entry, std::ios::binary) << "not a cubin";
  GpuKernelCache rebuilding(dir, DeviceType::cuda, "sm_90");
  std::string rebuilt = rebuilding.image(corrupt, "silu");
  EXPECT_EQ(rebuilding.stats().rebuilt, 1u);
  EXPECT_EQ(rebuilding.stats().compiled, 1u);
  EXPECT_EQ(rebuilt.compare(0, 4,
                            "\x7f"
                            "ELF"),
            0);
  EXPECT_EQ(read_cache_entry(corrupt_entry.string()), rebuilt);
  // A whole entry holding a cut-off cubin is rebuilt too.
  std::string cut = source + "// cut-off cubin\n";
  std::filesystem::path cut_entry =
      std::filesystem::path(cache.directory()) / (cache.key(cut) + ".cubin");
  write_cache_entry(cut_entry.string(), std::string_view(cubin).substr(0, 3));
  GpuKernelCache rebuilding_cut(dir, DeviceType::cuda, "sm_90");
  EXPECT_EQ(rebuilding_cut.image(cut, "silu")
                .compare(0, 4,
                         "\x7f"
                         "ELF"),
            0);
  EXPECT_EQ(rebuilding_cut.stats().rebuilt, 1u);

  // The key covers the target: another architecture is another entry.
  GpuKernelCache ampere(dir, DeviceType::cuda, "sm_80");
  EXPECT_NE(ampere.key(source), cache.key(source));
#endif
}

TEST(CudaCodegen, NvrtcErrorsNameTheKernelTheSourceAndTheLog) {
#ifndef TESSERA_CUDA
  GTEST_SKIP() << "built without CUDA (TESSERA_CUDA=OFF): NVRTC is not linked";
#else
  GpuKernelCache cache(fresh_temp_dir("cuda_cache_broken"), DeviceType::cuda, "sm_90");
  tessera::testing::expect_broken_kernel_error(cache, ".cu", "--gpu-architecture=sm_90");
  EXPECT_THROW(GpuKernelCache(fresh_temp_dir("cuda_cache_bad_arch"), DeviceType::cuda, "ampere"),
               Error);
#endif
}

// ---- On a GPU: compiled mode runs the NVRTC kernels ----

namespace {

CompileOptions gpu_compiled_options(const std::string& cache, size_t num_inputs,
                                    std::shared_ptr<const CompiledPlan>* plan) {
  // The row cases test the kernels generated for decomposed ops: the rotary-attention pass would
  // keep a rope with no attention after it as rotary_embedding's own kernel.
  CompilerOptions options = test_compiler_options(cache);
  options.config.pass_config.enable_rotary_attention_fusion = false;
  return compiled_mode_options(options, token_dims(num_inputs), custom_ops_off(),
                               [plan](auto p) { *plan = p; });
}

}  // namespace

TEST(GpuCompiledMode, FusedRowKernelsMatchEager) {
  Device gpu;
  if (!first_gpu(&gpu) || gpu.type != DeviceType::cuda)
    GTEST_SKIP() << "no CUDA device available (needs a CUDA build and a device)";
  std::string cache = fresh_temp_dir("cuda_cache_gpu_rows");
  for (DType dtype : {DType::f32, DType::bf16}) {
    std::vector<RowCase> cases = row_cases(dtype, gpu);
    cases.push_back(rope_of_width(32, 8, 64, dtype, gpu));  // rows split over 8 blocks
    for (const RowCase& row_case : cases) {
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

// The vector loop (rows of 2048: 16-byte loads and stores) and the scalar loop (rows of 33), in
// f32 and bf16, and the vector loop's element-by-element path for inputs that are not aligned
// (a view one element into its buffer).
TEST(GpuCompiledMode, VectorAndScalarRowLoopsMatchEager) {
  Device gpu;
  if (!first_gpu(&gpu) || gpu.type != DeviceType::cuda)
    GTEST_SKIP() << "no CUDA device available (needs a CUDA build and a device)";
  std::string cache = fresh_temp_dir("cuda_cache_gpu_vector");
  auto unaligned_copy = [](const Tensor& t) {
    Tensor buffer = Tensor::empty({t.numel() + 1}, t.dtype(), t.device());
    Tensor view = buffer.slice(0, 1, t.numel() + 1).view(t.sizes());
    view.copy_from(t);
    return view;
  };
  for (DType dtype : {DType::f32, DType::bf16}) {
    // 40000 and 40001: long rows, which pointwise kernels split over blocks: by 16-byte groups
    // per thread (20 blocks of bf16, 40 of f32) or, without the vector form (40001), by elements
    // (157).
    for (int64_t width : {2048, 33, 40000, 40001}) {
      for (const RowCase& row_case :
           {rms_norm_of_width(width, dtype, gpu), silu_and_mul_of_width(width, dtype, gpu)}) {
        SCOPED_TRACE(fmt::format("{} {}", row_case.name, dtype_name(dtype)));
        std::shared_ptr<const CompiledPlan> plan;
        CompiledFunction compiled(row_case.function, gpu_compiled_options(cache, 1, &plan));
        for (int64_t tokens : {1, 7, 64}) {
          for (bool aligned : {true, false}) {
            std::vector<Tensor> inputs = row_case.inputs(tokens);
            if (!aligned) inputs[0] = unaligned_copy(inputs[0]);
            ASSERT_EQ(reinterpret_cast<uintptr_t>(inputs[0].data_ptr()) % 16 == 0, aligned);
            std::vector<Tensor> got = compiled(inputs), want = row_case.function(inputs);
            ASSERT_EQ(got.size(), 1u);
            EXPECT_LT(relative_error(got[0], want[0]), tolerance(dtype))
                << tokens << " tokens, " << (aligned ? "aligned" : "unaligned") << " input";
          }
        }
        ASSERT_NE(plan, nullptr);
        ASSERT_EQ(plan->kernels.size(), 1u) << plan->explain();
        EXPECT_NE(plan->kernels[0].compiled, nullptr);
        const bool pointwise = row_case.name.starts_with("silu");
        const bool f32 = dtype == DType::f32;
        const int row_blocks = !pointwise       ? 1
                               : width == 40001 ? 157
                               : width == 40000 ? (f32 ? 40 : 20)
                               : width == 2048  ? (f32 ? 2 : 1)
                                                : 1;
        EXPECT_THAT(plan->kernels[0].source,
                    HasSubstr(fmt::format("#define TSR_ROW_BLOCKS {}\n", row_blocks)));
        if (width % 8 == 0) {
          EXPECT_THAT(plan->kernels[0].source,
                      HasSubstr(fmt::format("tsr_stv(out0, row * {} + tsr_first", width)));
        } else {
          EXPECT_THAT(plan->kernels[0].source, ::testing::Not(HasSubstr("tsr_stv(out0")));
        }
      }
    }
  }
}

TEST(GpuCompiledMode, LlamaForwardEqualsEager) {
  Device gpu;
  if (!first_gpu(&gpu) || gpu.type != DeviceType::cuda)
    GTEST_SKIP() << "no CUDA device available (needs a CUDA build and a device)";
  for (DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    auto model = std::shared_ptr<const CausalLM>(
        create_model(load_model("synthetic:qwen3-tiny", {dtype, gpu}), 256));
    RunnerConfig eager_options = runner_config(CompilationMode::eager);
    ModelRunner eager(model, with_kv_blocks_for(eager_options, model->max_positions()));
    RunnerConfig compiled_options;
    compiled_options.compilation.mode = CompilationMode::compiled;
    compiled_options.compilation.cache_dir = fresh_temp_dir("cuda_cache_gpu_llama");
    compiled_options.scheduler.max_num_batched_tokens = 64;
    compiled_options.compilation.custom_ops = {"none"};  // everything fuses
    ModelRunner compiled(model, with_kv_blocks_for(compiled_options, model->max_positions()));
    for (int64_t tokens : {1, 7, 64}) {
      std::vector<int32_t> ids;
      for (int64_t i = 0; i < tokens; ++i)
        ids.push_back(static_cast<int32_t>((i * 131 + tokens) % 500 + 3));
      std::vector<float> want = logits_by_chunks(eager, ids, {tokens}).back();
      std::vector<float> got = logits_by_chunks(compiled, ids, {tokens}).back();
      ASSERT_EQ(got.size(), want.size());
      double diff = 0, norm = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_TRUE(std::isfinite(got[i])) << tokens << " tokens, logit " << i;
        diff += (got[i] - want[i]) * (got[i] - want[i]);
        norm += want[i] * want[i];
      }
      // bf16: the fused kernels keep intermediates in f32 where eager rounds each op's output.
      EXPECT_LT(std::sqrt(diff / norm), dtype == DType::f32 ? 1e-5 : 3e-2) << tokens << " tokens";
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
  std::string dir = fresh_temp_dir("cuda_cache_gpu_warm");
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

  // A whole entry that looks like a cubin but does not load is rebuilt. This is the
  // deliberately corrupt cubin the driver is handed (compute-sanitizer reports its load error;
  // scripts/gpu_check.sh keeps this test out of the sanitizer's error count).
  GpuKernelCache cache = GpuKernelCache::for_device(dir, gpu);
  std::string source = cold->kernels[0].source + "// a truncated entry\n";
  std::filesystem::path entry =
      std::filesystem::path(cache.directory()) / (cache.key(source) + ".cubin");
  write_cache_entry(entry.string(), std::string("\x7f"
                                                "ELF",
                                                4) +
                                        "truncated");
  EXPECT_NE(cache.load(source, "truncated"), nullptr);
  EXPECT_EQ(cache.stats().rebuilt, 1u);
  EXPECT_EQ(cache.stats().compiled, 1u);
}
#endif
