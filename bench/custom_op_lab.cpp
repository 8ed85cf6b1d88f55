// Custom-op kernel lab (the llm.c dev/cuda habit): for each LLM custom op (rms_norm,
// fused_add_rms_norm, rotary_embedding, silu_and_mul, gelu_and_mul) it
//   1. checks the GPU kernel against a float64 reference computed here on the host, on small
//      shapes chosen to reach every code path (16-byte packs, element-wise fallbacks for odd sizes
//      and misaligned pointers, rows longer than rms_norm's register cache, partial rotary dims,
//      both rotary styles, i32/i64 positions, an f32 cache with 16-bit query/key);
//   2. times it at LLM sizes (a 4096-token prefill and a 32-token decode step): the median over
//      repeats of an event-timed batch of launches, with the bytes it must move, the GB/s that
//      makes and the percentage of the device-to-device copy bandwidth measured first.
// Exits non-zero when a check fails.
//
//   custom_op_lab [--device cuda:0] [--skip-timing]
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include "kernels/attributes.h"
#include "kernels/backend.h"
#include "kernels/check.h"
#include "kernels/kernel_registry.h"
#include "kernels/logging.h"
#include "kernels/tensor.h"

namespace tessera::lab {
namespace {

// ---- Inputs.

// A small deterministic generator: uniform floats in [low, high) (fast enough for 10^8 values).
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  float uniform(float low, float high) {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    const auto bits = static_cast<uint32_t>(state_ >> 40);  // 24 random bits
    return low + (high - low) * static_cast<float>(bits) * (1.0f / 16777216.0f);
  }

 private:
  uint64_t state_;
};

Tensor random_tensor(Random& random, const Shape& sizes, DType dtype, Device device,
                     float low = -2.0f, float high = 2.0f) {
  std::vector<float> values(static_cast<size_t>(shape_numel(sizes)));
  for (float& value : values) value = random.uniform(low, high);
  return Tensor::from_floats(values, sizes, dtype, device);
}

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

Tensor positions_tensor(Random& random, int64_t tokens, int64_t max_position, DType dtype,
                        Device device) {
  std::vector<int64_t> values(static_cast<size_t>(tokens));
  for (int64_t& value : values) {
    value = std::min<int64_t>(max_position - 1, static_cast<int64_t>(random.uniform(
                                                    0.0f, static_cast<float>(max_position))));
  }
  return Tensor::from_ints(values, {tokens}, dtype, device);
}

// ---- Running a kernel directly (outputs allocated here, as the dispatcher would).

void run(const std::string& op, const std::vector<Tensor>& inputs, const Attributes& attributes,
         std::vector<Tensor>& outputs) {
  run_kernel(op, outputs.front().device().type, KernelArgs{inputs, attributes, outputs});
}

// ---- float64 references.

using Values = std::vector<double>;

Values reference_rms_norm(const Values& x, const Values* residual, const Values& weight,
                          int64_t hidden, double eps, Values* residual_out) {
  Values out(x.size());
  if (residual_out != nullptr) residual_out->resize(x.size());
  for (size_t start = 0; start < x.size(); start += static_cast<size_t>(hidden)) {
    double sum_of_squares = 0.0;
    for (int64_t i = 0; i < hidden; ++i) {
      double value = x[start + i] + (residual != nullptr ? (*residual)[start + i] : 0.0);
      if (residual_out != nullptr) (*residual_out)[start + i] = value;
      sum_of_squares += value * value;
    }
    const double scale = 1.0 / std::sqrt(sum_of_squares / static_cast<double>(hidden) + eps);
    for (int64_t i = 0; i < hidden; ++i) {
      double value = x[start + i] + (residual != nullptr ? (*residual)[start + i] : 0.0);
      out[start + i] = value * scale * weight[i];
    }
  }
  return out;
}

Values reference_rotary(const std::vector<int64_t>& positions, const Values& x, int64_t width,
                        const Values& cache, int64_t rot_dim, int64_t head_size, bool is_neox) {
  Values out = x;
  const int64_t half = rot_dim / 2;
  for (size_t token = 0; token < positions.size(); ++token) {
    const double* cos = cache.data() + positions[token] * rot_dim;
    const double* sin = cos + half;
    for (int64_t head = 0; head < width; head += head_size) {
      const int64_t base = static_cast<int64_t>(token) * width + head;
      for (int64_t i = 0; i < half; ++i) {
        const int64_t first = base + (is_neox ? i : 2 * i);
        const int64_t second = base + (is_neox ? i + half : 2 * i + 1);
        out[first] = x[first] * cos[i] - x[second] * sin[i];
        out[second] = x[second] * cos[i] + x[first] * sin[i];
      }
    }
  }
  return out;
}

double silu(double x) {
  return x / (1.0 + std::exp(-x));
}
double gelu(double x, bool tanh_form) {
  if (tanh_form) {
    const double k = std::sqrt(2.0 / std::numbers::pi);
    return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
  }
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}

Values reference_activation_and_mul(const Values& x, int64_t half,
                                    const std::function<double(double)>& activation) {
  Values out(x.size() / 2);
  for (size_t row = 0; row < out.size() / static_cast<size_t>(half); ++row) {
    for (int64_t j = 0; j < half; ++j) {
      out[row * half + j] = activation(x[row * 2 * half + j]) * x[row * 2 * half + half + j];
    }
  }
  return out;
}

// ---- Checks.

// One rounding of the output, plus f32 accumulation: a few units in the last place.
double relative_tolerance(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return 1e-5;
    case DType::f16:
      return 2e-3;
    default:
      return 1e-2;
  }
}

int failures = 0;

// |got - expected| <= rtol * (|expected| + 1) for every element (inputs are of order 1, so the
// "+ 1" covers results near zero after cancellation).
void expect_close(const std::string& what, const Tensor& got, const Values& expected) {
  const Values values = got.to_doubles();
  const double rtol = relative_tolerance(got.dtype());
  double max_error = 0.0;
  int64_t bad = 0;
  int64_t first_bad = -1;
  TESSERA_CHECK(values.size() == expected.size(), "{}: {} values, {} expected", what, values.size(),
                expected.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const double error = std::abs(values[i] - expected[i]);
    max_error = std::max(max_error, std::isnan(error) ? INFINITY : error);
    if (!(error <= rtol * (std::abs(expected[i]) + 1.0))) {
      if (first_bad < 0) first_bad = static_cast<int64_t>(i);
      ++bad;
    }
  }
  if (bad == 0) {
    fmt::print("  ok    {:<64} max |error| {:.2e}\n", what, max_error);
  } else {
    ++failures;
    fmt::print("  FAIL  {:<64} {} of {} elements off; first at {}: {} vs {}\n", what, bad,
               values.size(), first_bad, values[first_bad], expected[first_bad]);
  }
}

std::string layout_name(bool misaligned) {
  return misaligned ? " misaligned" : "";
}

void check_norms(Device device, Random& random) {
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
      Tensor x = random_tensor(random, c.shape, dtype, device);
      Tensor residual = random_tensor(random, c.shape, dtype, device);
      Tensor weight = random_tensor(random, {hidden}, dtype, device, 0.5f, 1.5f);
      if (c.misaligned) {
        x = misaligned_copy(x);
        residual = misaligned_copy(residual);
      }
      const std::string label =
          fmt::format("{} {}{}", dtype_name(dtype), shape_str(c.shape), layout_name(c.misaligned));
      const Attributes attributes{{"eps", eps}};
      std::vector<Tensor> outputs{Tensor::empty(c.shape, dtype, device)};
      run("rms_norm", {x, weight}, attributes, outputs);
      expect_close(
          "rms_norm " + label, outputs[0],
          reference_rms_norm(x.to_doubles(), nullptr, weight.to_doubles(), hidden, eps, nullptr));

      std::vector<Tensor> fused{Tensor::empty(c.shape, dtype, device),
                                Tensor::empty(c.shape, dtype, device)};
      run("fused_add_rms_norm", {x, residual, weight}, attributes, fused);
      const Values residual_values = residual.to_doubles();
      Values residual_out;
      const Values out = reference_rms_norm(x.to_doubles(), &residual_values, weight.to_doubles(),
                                            hidden, eps, &residual_out);
      expect_close("fused_add_rms_norm out " + label, fused[0], out);
      expect_close("fused_add_rms_norm residual_out " + label, fused[1], residual_out);
    }
  }
}

void check_rotary(Device device, Random& random) {
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
          Tensor positions =
              positions_tensor(random, c.tokens, max_position, position_dtype, device);
          Tensor query =
              random_tensor(random, {c.tokens, c.query_heads * c.head_size}, dtype, device);
          Tensor key = random_tensor(random, {c.tokens, c.key_heads * c.head_size}, dtype, device);
          if (c.misaligned) {
            query = misaligned_copy(query);
            key = misaligned_copy(key);
          }
          Tensor cache = rope_cache(max_position, c.rot_dim, cache_dtype, device);
          std::vector<Tensor> outputs{Tensor::empty(query.sizes(), dtype, device),
                                      Tensor::empty(key.sizes(), dtype, device)};
          run("rotary_embedding", {positions, query, key, cache},
              {{"head_size", c.head_size}, {"is_neox", is_neox}}, outputs);
          const std::string label =
              fmt::format("{} {} T{} q{}x{} k{}x{} rot{} cache {} pos {}{}",
                          is_neox ? "neox" : "gptj", dtype_name(dtype), c.tokens, c.query_heads,
                          c.head_size, c.key_heads, c.head_size, c.rot_dim, dtype_name(cache_dtype),
                          dtype_name(position_dtype), layout_name(c.misaligned));
          const std::vector<int64_t> position_values = positions.to_ints();
          const Values cache_values = cache.to_doubles();
          expect_close("query " + label, outputs[0],
                       reference_rotary(position_values, query.to_doubles(), query.size(1),
                                        cache_values, c.rot_dim, c.head_size, is_neox));
          expect_close("key " + label, outputs[1],
                       reference_rotary(position_values, key.to_doubles(), key.size(1),
                                        cache_values, c.rot_dim, c.head_size, is_neox));
        }
      }
    }
  }

  // A position past the cache: rotated dims NaN, pass-through dims intact, no fault.
  const std::vector<int64_t> bad_positions{3, 8};
  Tensor positions = Tensor::from_ints(bad_positions, {2}, DType::i64, device);
  Tensor query = random_tensor(random, {2, 16}, DType::f32, device);
  Tensor key = random_tensor(random, {2, 16}, DType::f32, device);
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

void check_activations(Device device, Random& random) {
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
      Tensor x = random_tensor(random, c.shape, dtype, device, -6.0f, 6.0f);
      if (c.misaligned) x = misaligned_copy(x);
      const int64_t half = c.shape.back() / 2;
      Shape out_shape = c.shape;
      out_shape.back() = half;
      const Values x_values = x.to_doubles();
      const std::string label =
          fmt::format("{} {}{}", dtype_name(dtype), shape_str(c.shape), layout_name(c.misaligned));
      std::vector<Tensor> outputs{Tensor::empty(out_shape, dtype, device)};
      run("silu_and_mul", {x}, {}, outputs);
      expect_close("silu_and_mul " + label, outputs[0],
                   reference_activation_and_mul(x_values, half, silu));
      for (bool tanh_form : {false, true}) {
        run("gelu_and_mul", {x}, {{"approximate", std::string(tanh_form ? "tanh" : "none")}},
            outputs);
        expect_close(fmt::format("gelu_and_mul ({}) {}", tanh_form ? "tanh" : "erf", label),
                     outputs[0], reference_activation_and_mul(x_values, half, [&](double value) {
                       return gelu(value, tanh_form);
                     }));
      }
    }
  }
}

// ---- Timing.

class Timer {
 public:
  explicit Timer(Device device)
      : device_(device),
        backend_(backend(device)),
        start_(backend_.create_event(device.index)),
        end_(backend_.create_event(device.index)) {}

  // Median milliseconds of one call of `launch`, over `samples` event-timed batches of `batch`
  // calls, after a warm-up batch.
  double median_ms(const std::function<void()>& launch, int samples = 15, int batch = 10) {
    Stream& stream = backend_.current_stream(device_.index);
    for (int i = 0; i < batch; ++i) launch();
    std::vector<double> times;
    for (int sample = 0; sample < samples; ++sample) {
      start_->record(stream);
      for (int i = 0; i < batch; ++i) launch();
      end_->record(stream);
      end_->synchronize();
      times.push_back(static_cast<double>(start_->elapsed_ms(*end_)) / batch);
    }
    std::nth_element(times.begin(), times.begin() + samples / 2, times.end());
    return times[samples / 2];
  }

 private:
  Device device_;
  DeviceBackend& backend_;
  std::unique_ptr<Event> start_;
  std::unique_ptr<Event> end_;
};

// Device-to-device copy bandwidth (bytes read + written per second): the ceiling for kernels that
// stream memory once.
double copy_ceiling_gbps(Device device, Timer& timer) {
  const int64_t elements = int64_t{64} << 20;  // 256 MiB of f32, far beyond L2
  Tensor source = Tensor::empty({elements}, DType::f32, device);
  Tensor target = Tensor::empty({elements}, DType::f32, device);
  DeviceBackend& gpu = backend(device);
  const size_t bytes = source.nbytes();
  const double ms = timer.median_ms(
      [&] { gpu.copy(target.data_ptr(), device, source.data_ptr(), device, bytes); }, 11, 5);
  const double gbps = 2.0 * static_cast<double>(bytes) / (ms * 1e6);
  fmt::print("device-to-device copy of {} MiB: {:.1f} us, {:.0f} GB/s (read + write)\n\n",
             bytes >> 20, ms * 1e3, gbps);
  return gbps;
}

struct Timed {
  std::string op;
  std::string shape;
  double bytes;
  std::function<void()> launch;
};

void time_ops(Device device, Random& random) {
  Timer timer(device);
  const double ceiling = copy_ceiling_gbps(device, timer);
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
    Tensor x = random_tensor(random, {tokens, hidden}, dtype, device);
    Tensor residual = random_tensor(random, {tokens, hidden}, dtype, device);
    Tensor weight = random_tensor(random, {hidden}, dtype, device, 0.5f, 1.5f);
    std::vector<Tensor> norm_out{Tensor::empty({tokens, hidden}, dtype, device)};
    std::vector<Tensor> fused_out{Tensor::empty({tokens, hidden}, dtype, device),
                                  Tensor::empty({tokens, hidden}, dtype, device)};
    const std::vector<Tensor> norm_inputs{x, weight};
    const std::vector<Tensor> fused_inputs{x, residual, weight};
    const Attributes norm_attributes{{"eps", 1e-5}};

    Tensor positions = positions_tensor(random, tokens, max_position, DType::i64, device);
    Tensor query = random_tensor(random, {tokens, query_heads * head_size}, dtype, device);
    Tensor key = random_tensor(random, {tokens, key_heads * head_size}, dtype, device);
    Tensor cache = rope_cache(max_position, head_size, DType::f32, device);
    std::vector<Tensor> rotary_out{Tensor::empty(query.sizes(), dtype, device),
                                   Tensor::empty(key.sizes(), dtype, device)};
    const std::vector<Tensor> rotary_inputs{positions, query, key, cache};

    Tensor gate_up = random_tensor(random, {tokens, 2 * intermediate}, dtype, device);
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
      const double ms = timer.median_ms(timed.launch);
      const double gbps = timed.bytes / (ms * 1e6);
      fmt::print("{:<26} {:<34} {:>10.2f} {:>10.2f} {:>9.0f} {:>8.1f}%\n", timed.op, timed.shape,
                 ms * 1e3, timed.bytes / 1e6, gbps, 100.0 * gbps / ceiling);
    }
  }
}

int lab_main(int argc, char** argv) {
  Device device;
  bool found = first_gpu(&device);
  bool timing = true;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--device" && i + 1 < argc) {
      device = parse_device(argv[++i]);
      found = device_available(device);
    } else if (arg == "--skip-timing") {
      timing = false;
    } else {
      fmt::print(stderr, "usage: custom_op_lab [--device cuda:0] [--skip-timing]\n");
      return 2;
    }
  }
  if (!found) {
    fmt::print(stderr, "custom_op_lab: no GPU device available\n");
    return 1;
  }
  fmt::print("custom_op_lab on {} ({})\n\n", device.str(),
             backend(device).device_name(device.index));
  Random random(20240611);
  check_norms(device, random);
  check_rotary(device, random);
  check_activations(device, random);
  fmt::print("\n{} check(s) failed\n\n", failures);
  if (timing) time_ops(device, random);
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace tessera::lab

int main(int argc, char** argv) {
  tessera::log_to_stderr();
  try {
    return tessera::lab::lab_main(argc, argv);
  } catch (const std::exception& error) {
    fmt::print(stderr, "custom_op_lab: {}\n", error.what());
    return 1;
  }
}
