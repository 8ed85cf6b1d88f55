// Custom-op kernel lab (the llm.c dev/cuda habit): for each LLM custom op (rms_norm,
// fused_add_rms_norm, rotary_embedding, silu_and_mul, gelu_and_mul) it
//   1. checks the GPU kernel against the float64 reference of tests/support/reference.h, on small
//      shapes chosen to reach every code path (16-byte packs, element-wise fallbacks for odd sizes
//      and misaligned pointers, rows longer than rms_norm's register cache, partial rotary dims,
//      both rotary styles, i32/i64 positions, an f32 cache with 16-bit query/key);
//   2. times it at LLM sizes (a 4096-token prefill and a 32-token decode step): the median of
//      event-timed samples, with the bytes it must move, the GB/s that makes and the percentage
//      of the device-to-device copy bandwidth measured first.
// Exits non-zero when a check fails.
//
// Timing, the copy ceiling and the checks are bench/lab_harness.h's.
//
//   custom_op_lab [--device cuda:N] [--quick] [--skip-timing]
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/lab_harness.h"
#include "runtime/attributes.h"
#include "runtime/backend/backend.h"
#include "runtime/check.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor.h"

namespace tessera::lab {
namespace {

// ---- Inputs.

// The same values at an address one element past a 16-byte boundary: the kernels must take their
// element-wise paths.
Tensor misaligned_copy(const Tensor& tensor) {
  Tensor buffer = Tensor::empty({tensor.numel() + 1}, tensor.dtype(), tensor.device());
  Tensor view = buffer.as_strided(tensor.sizes(), contiguous_strides(tensor.sizes()), 1);
  view.copy_from(tensor);
  return view;
}

// cos in the first rot_dim / 2 columns and sin in the rest, for the usual RoPE frequencies.
Tensor rope_cache(int64_t max_position, int64_t rot_dim, DType dtype, Device device) {
  std::vector<float> values(static_cast<size_t>(max_position * rot_dim));
  const int64_t half = rot_dim / 2;
  for (int64_t position = 0; position < max_position; ++position) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle =
          static_cast<double>(position) *
          std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(rot_dim));
      values[position * rot_dim + i] = static_cast<float>(std::cos(angle));
      values[position * rot_dim + half + i] = static_cast<float>(std::sin(angle));
    }
  }
  return Tensor::from_floats(values, {max_position, rot_dim}, dtype, device);
}

Tensor positions_tensor(LabRandom& random, int64_t tokens, int64_t max_position, DType dtype) {
  return random.integers({tokens}, dtype, max_position);
}

// ---- Running a kernel directly (outputs allocated here, as the dispatcher would).

void run(const std::string& op, const std::vector<Tensor>& inputs, const Attributes& attributes,
         std::vector<Tensor>& outputs) {
  run_kernel(op, outputs.front().device().type, KernelArgs{inputs, attributes, outputs});
}

// ---- Checks against the float64 references.

int failures = 0;

// Inputs are of order 1, so results near zero after cancellation are judged against rtol * 1.
constexpr double kNearZero = 1.0;

void expect_close(const std::string& what, const Tensor& got, const Expected& expected) {
  const Check check = compare(got, expected, kNearZero);
  if (check.passed) {
    fmt::print("  ok    {:<64} worst error / allowed {:.2f}\n", what, check.worst);
    return;
  }
  ++failures;
  const double value = got.to_doubles()[static_cast<size_t>(check.first_failing)];
  fmt::print("  FAIL  {:<64} {} of {} elements off; first at {}: {} vs {}\n", what, check.failing,
             got.numel(), check.first_failing, value,
             expected.values[static_cast<size_t>(check.first_failing)]);
}

std::string layout_name(bool misaligned) {
  return misaligned ? " misaligned" : "";
}

void check_norms(Device device, LabRandom& random) {
  fmt::print("rms_norm / fused_add_rms_norm\n");
  struct Case {
    Shape shape;
    bool misaligned;
  };
  // 4096: packs; 33: odd; 40000: past the register cache; 300 rows: the many-rows block size.
  const std::vector<Case> cases = {
      {{3, 4096}, false},   {{5, 33}, false},  {{2, 40000}, false},
      {{300, 1024}, false}, {{3, 4096}, true}, {{1, 7}, false},
  };
  const double eps = 1e-5;
  for (DType dtype : kFloatDTypes) {
    for (const Case& c : cases) {
      const int64_t hidden = c.shape.back();
      Tensor x = random.uniform(c.shape, dtype, -2, 2);
      Tensor residual = random.uniform(c.shape, dtype, -2, 2);
      Tensor weight = random.uniform({hidden}, dtype, 0.5f, 1.5f);
      if (c.misaligned) {
        x = misaligned_copy(x);
        residual = misaligned_copy(residual);
      }
      const std::string label =
          fmt::format("{} {}{}", dtype_name(dtype), shape_str(c.shape), layout_name(c.misaligned));
      const Attributes attributes{{"eps", eps}};
      std::vector<Tensor> outputs{Tensor::empty(c.shape, dtype, device)};
      run("rms_norm", {x, weight}, attributes, outputs);
      expect_close("rms_norm " + label, outputs[0],
                   reference_outputs("rms_norm", std::vector<Tensor>{x, weight}, attributes)[0]);

      std::vector<Tensor> fused{Tensor::empty(c.shape, dtype, device),
                                Tensor::empty(c.shape, dtype, device)};
      const std::vector<Tensor> fused_inputs{x, residual, weight};
      run("fused_add_rms_norm", fused_inputs, attributes, fused);
      const std::vector<Expected> expected =
          reference_outputs("fused_add_rms_norm", fused_inputs, attributes);
      expect_close("fused_add_rms_norm out " + label, fused[0], expected[0]);
      expect_close("fused_add_rms_norm residual_out " + label, fused[1], expected[1]);
    }
  }
}

void check_rotary(Device device, LabRandom& random) {
  fmt::print("rotary_embedding\n");
  struct Case {
    int64_t tokens, query_heads, key_heads, head_size, rot_dim;
    bool misaligned;
  };
  const std::vector<Case> cases = {
      {7, 4, 2, 128, 128, false},  // packs
      {5, 3, 1, 128, 64, false},   // partial rotary: dims 64..127 pass through, in packs
      {9, 3, 1, 10, 6, false},     // odd widths: element by element
      {4, 2, 2, 64, 32, true},     // misaligned query and key
      {33, 8, 2, 32, 32, false},
  };
  const int64_t max_position = 97;
  for (DType dtype : kFloatDTypes) {
    for (const Case& c : cases) {
      for (bool is_neox : {true, false}) {
        for (DType cache_dtype : {dtype, DType::f32}) {
          if (cache_dtype == DType::f32 && dtype == DType::f32 && !is_neox) continue;
          const DType position_dtype = is_neox ? DType::i64 : DType::i32;
          Tensor positions = positions_tensor(random, c.tokens, max_position, position_dtype);
          Tensor query = random.uniform({c.tokens, c.query_heads * c.head_size}, dtype, -2, 2);
          Tensor key = random.uniform({c.tokens, c.key_heads * c.head_size}, dtype, -2, 2);
          if (c.misaligned) {
            query = misaligned_copy(query);
            key = misaligned_copy(key);
          }
          Tensor cache = rope_cache(max_position, c.rot_dim, cache_dtype, device);
          std::vector<Tensor> outputs{Tensor::empty(query.sizes(), dtype, device),
                                      Tensor::empty(key.sizes(), dtype, device)};
          const std::vector<Tensor> inputs{positions, query, key, cache};
          const Attributes attributes{{"head_size", c.head_size}, {"is_neox", is_neox}};
          run("rotary_embedding", inputs, attributes, outputs);
          const std::string label =
              fmt::format("{} {} T{} q{}x{} k{}x{} rot{} cache {} pos {}{}",
                          is_neox ? "neox" : "gptj", dtype_name(dtype), c.tokens, c.query_heads,
                          c.head_size, c.key_heads, c.head_size, c.rot_dim, dtype_name(cache_dtype),
                          dtype_name(position_dtype), layout_name(c.misaligned));
          const std::vector<Expected> expected =
              reference_outputs("rotary_embedding", inputs, attributes);
          expect_close("query " + label, outputs[0], expected[0]);
          expect_close("key " + label, outputs[1], expected[1]);
        }
      }
    }
  }

  // A position past the cache: rotated dims NaN, pass-through dims intact, no fault.
  const std::vector<int64_t> bad_positions{3, 8};
  Tensor positions = Tensor::from_ints(bad_positions, {2}, DType::i64, device);
  Tensor query = random.uniform({2, 16}, DType::f32, -2, 2);
  Tensor key = random.uniform({2, 16}, DType::f32, -2, 2);
  std::vector<Tensor> outputs{Tensor::empty({2, 16}, DType::f32, device),
                              Tensor::empty({2, 16}, DType::f32, device)};
  run("rotary_embedding", {positions, query, key, rope_cache(8, 8, DType::f32, device)},
      {{"head_size", int64_t{16}}, {"is_neox", true}}, outputs);
  const std::vector<float> got = outputs[0].to_floats();
  const std::vector<float> given = query.to_floats();
  bool as_documented = true;
  for (int64_t i = 0; i < 16; ++i) {
    as_documented &= !std::isnan(got[i]);  // position 3: valid
    as_documented &= i < 8 ? std::isnan(got[16 + i]) : got[16 + i] == given[16 + i];  // position 8
  }
  if (as_documented) {
    fmt::print("  ok    {:<64}\n", "position past the cache: NaN rotated dims, pass-through kept");
  } else {
    ++failures;
    fmt::print("  FAIL  a position past the cache did not give NaN rotated dims\n");
  }
}

void check_activations(Device device, LabRandom& random) {
  fmt::print("silu_and_mul / gelu_and_mul\n");
  struct Case {
    Shape shape;
    bool misaligned;
  };
  const std::vector<Case> cases = {
      {{3, 8192}, false},  {{5, 14}, false},  {{4, 8200}, false},
      {{2, 3, 66}, false}, {{3, 8192}, true},
  };
  for (DType dtype : kFloatDTypes) {
    for (const Case& c : cases) {
      Tensor x = random.uniform(c.shape, dtype, -6.0f, 6.0f);
      if (c.misaligned) x = misaligned_copy(x);
      const int64_t half = c.shape.back() / 2;
      Shape out_shape = c.shape;
      out_shape.back() = half;
      const std::string label =
          fmt::format("{} {}{}", dtype_name(dtype), shape_str(c.shape), layout_name(c.misaligned));
      const std::vector<Tensor> inputs{x};
      std::vector<Tensor> outputs{Tensor::empty(out_shape, dtype, device)};
      run("silu_and_mul", inputs, {}, outputs);
      expect_close("silu_and_mul " + label, outputs[0],
                   reference_outputs("silu_and_mul", inputs, {})[0]);
      for (const char* approximate : {"none", "tanh"}) {
        const Attributes attributes{{"approximate", std::string(approximate)}};
        run("gelu_and_mul", inputs, attributes, outputs);
        expect_close(fmt::format("gelu_and_mul ({}) {}", approximate, label), outputs[0],
                     reference_outputs("gelu_and_mul", inputs, attributes)[0]);
      }
    }
  }
}

// ---- Timing.

struct Timed {
  std::string op;
  std::string shape;
  double bytes;
  std::function<void()> launch;
};

void time_ops(const LabArgs& args, LabRandom& random) {
  const Device device = args.device;
  LabTimer timer(device, args.samples());
  const Ceilings ceilings = measure_ceilings(timer, random, /*with_gemm=*/false);
  const DType dtype = DType::bf16;
  const int64_t hidden = 4096;
  const int64_t intermediate = 14336;
  const int64_t query_heads = 32;
  const int64_t key_heads = 8;
  const int64_t head_size = 128;
  const int64_t max_position = 8192;
  const double element = static_cast<double>(element_size(dtype));

  fmt::print("{:<26} {:<34} {:>10} {:>10} {:>9} {:>9}\n", "op (bf16)", "shape", "time us",
             "MB moved", "GB/s", "% copy");
  for (int64_t tokens : {int64_t{4096}, int64_t{32}}) {
    Tensor x = random.uniform({tokens, hidden}, dtype, -2, 2);
    Tensor residual = random.uniform({tokens, hidden}, dtype, -2, 2);
    Tensor weight = random.uniform({hidden}, dtype, 0.5f, 1.5f);
    std::vector<Tensor> norm_out{Tensor::empty({tokens, hidden}, dtype, device)};
    std::vector<Tensor> fused_out{Tensor::empty({tokens, hidden}, dtype, device),
                                  Tensor::empty({tokens, hidden}, dtype, device)};
    const std::vector<Tensor> norm_inputs{x, weight};
    const std::vector<Tensor> fused_inputs{x, residual, weight};
    const Attributes norm_attributes{{"eps", 1e-5}};

    Tensor positions = positions_tensor(random, tokens, max_position, DType::i64);
    Tensor query = random.uniform({tokens, query_heads * head_size}, dtype, -2, 2);
    Tensor key = random.uniform({tokens, key_heads * head_size}, dtype, -2, 2);
    Tensor cache = rope_cache(max_position, head_size, DType::f32, device);
    std::vector<Tensor> rotary_out{Tensor::empty(query.sizes(), dtype, device),
                                   Tensor::empty(key.sizes(), dtype, device)};
    const std::vector<Tensor> rotary_inputs{positions, query, key, cache};

    Tensor gate_up = random.uniform({tokens, 2 * intermediate}, dtype, -2, 2);
    std::vector<Tensor> gated_out{Tensor::empty({tokens, intermediate}, dtype, device)};
    const std::vector<Tensor> gated_inputs{gate_up};

    const double rows = static_cast<double>(tokens);
    const double qk = rows * static_cast<double>((query_heads + key_heads) * head_size);
    const double rotary_bytes = 2.0 * qk * element + rows * 8.0 + rows * head_size * 4.0;
    const double gated_bytes = 3.0 * rows * intermediate * element;
    const std::string rotary_shape =
        fmt::format("T{} q{}x{} k{}x{}", tokens, query_heads, head_size, key_heads, head_size);
    std::vector<Timed> rows_to_time = {
        {"rms_norm", fmt::format("[{}, {}]", tokens, hidden), (2.0 * rows + 1.0) * hidden * element,
         [&] { run("rms_norm", norm_inputs, norm_attributes, norm_out); }},
        {"fused_add_rms_norm", fmt::format("[{}, {}]", tokens, hidden),
         (4.0 * rows + 1.0) * hidden * element,
         [&] { run("fused_add_rms_norm", fused_inputs, norm_attributes, fused_out); }},
        {"rotary_embedding neox", rotary_shape, rotary_bytes,
         [&] {
           run("rotary_embedding", rotary_inputs, {{"head_size", head_size}, {"is_neox", true}},
               rotary_out);
         }},
        {"rotary_embedding gptj", rotary_shape, rotary_bytes,
         [&] {
           run("rotary_embedding", rotary_inputs, {{"head_size", head_size}, {"is_neox", false}},
               rotary_out);
         }},
        {"silu_and_mul", fmt::format("[{}, 2 x {}]", tokens, intermediate), gated_bytes,
         [&] { run("silu_and_mul", gated_inputs, {}, gated_out); }},
        {"gelu_and_mul tanh", fmt::format("[{}, 2 x {}]", tokens, intermediate), gated_bytes,
         [&] {
           run("gelu_and_mul", gated_inputs, {{"approximate", std::string("tanh")}}, gated_out);
         }},
    };
    for (const Timed& timed : rows_to_time) {
      const double us = timer.median_us([&](int) { timed.launch(); });
      const Achieved rates = achieved(ceilings, timed.bytes, 0, us);
      fmt::print("{:<26} {:<34} {:>10.2f} {:>10.2f} {:>9.0f} {:>8.1f}%\n", timed.op, timed.shape,
                 us, timed.bytes / 1e6, rates.gb_per_s, rates.copy_percent);
    }
  }
}

int run_lab(const LabArgs& args) {
  const Device device = args.device;
  fmt::print("custom_op_lab on {} ({})\n\n", device.str(),
             backend(device).device_name(device.index));
  LabRandom random(device);
  check_norms(device, random);
  check_rotary(device, random);
  check_activations(device, random);
  fmt::print("\n{} check(s) failed\n\n", failures);
  if (!args.skip_timing) time_ops(args, random);
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace tessera::lab

int main(int argc, char** argv) {
  return tessera::lab::lab_main("custom_op_lab",
                                "checks and times the custom-op GPU kernels against float64", argc,
                                argv, tessera::lab::run_lab);
}
