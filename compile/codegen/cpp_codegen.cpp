#include "compile/codegen/cpp_codegen.h"

#include "compile/codegen/scalar_math_text.h"
#include "runtime/check.h"

namespace tessera {
namespace {

// Loads, stores and math shared by every generated CPU kernel. f16 goes through the compiler's
// _Float16, bf16 through bits (round to nearest even), as the hand-written kernels do.
constexpr const char* kPrelude = R"(#include <cmath>
#include <cstdint>
#include <cstring>

struct tsr_bf16 { uint16_t bits; };
struct tsr_f16 { uint16_t bits; };

static inline float tsr_ld(const float* p, int64_t i) { return p[i]; }
static inline float tsr_ld(const tsr_bf16* p, int64_t i) {
  uint32_t bits = (uint32_t)p[i].bits << 16; float f; std::memcpy(&f, &bits, 4); return f;
}
static inline float tsr_ld(const tsr_f16* p, int64_t i) {
  _Float16 h; std::memcpy(&h, &p[i].bits, 2); return (float)h;
}
static inline uint16_t tsr_bf16_bits(float v) {
  uint32_t x; std::memcpy(&x, &v, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}
static inline void tsr_st(float* p, int64_t i, float v) { p[i] = v; }
static inline void tsr_st(tsr_bf16* p, int64_t i, float v) { p[i].bits = tsr_bf16_bits(v); }
static inline void tsr_st(tsr_f16* p, int64_t i, float v) {
  _Float16 h = (_Float16)v; std::memcpy(&p[i].bits, &h, 2);
}
static inline float tsr_round_bf16(float v) {
  uint32_t bits = (uint32_t)tsr_bf16_bits(v) << 16; float f; std::memcpy(&f, &bits, 4); return f;
}
static inline float tsr_round_f16(float v) { return (float)(_Float16)v; }
#define TSR_SCALAR static inline
)";

// The prelude, then the pointwise formulas the hand-written kernels compile too.
std::string prelude() {
  return std::string(kPrelude) + kScalarMathSource;
}

}  // namespace

std::string generate_cpp_kernel(const RowKernelBody& body, const std::string& name) {
  std::string source = prelude();
  // The name stays out of the source: identical kernels of different layers share one artifact.
  (void)name;
  source +=
      "\nextern \"C\" void tessera_kernel(int64_t row_begin, int64_t row_end, void* const* "
      "buffers) {\n";
  size_t slot = 0;
  for (size_t i = 0; i < body.input_dtypes.size(); ++i, ++slot) {
    const char* type = prelude_type(body.input_dtypes[i]);
    source +=
        fmt::format("  const {0}* __restrict in{1} = (const {0}*)buffers[{2}];\n", type, i, slot);
  }
  for (size_t i = 0; i < body.outputs.size(); ++i, ++slot) {
    const char* type = prelude_type(body.outputs[i].dtype);
    source += fmt::format("  {0}* __restrict out{1} = ({0}*)buffers[{2}];\n", type, i, slot);
  }
  source += "  for (int64_t row = row_begin; row < row_end; ++row) {\n";
  for (const RowReduction& r : body.reductions) {
    source += fmt::format("    float {}[{}];\n", r.array, r.groups);
    source += fmt::format("    for (int64_t g = 0; g < {}; ++g) {{\n", r.groups);
    source += fmt::format("      float acc = {};\n", r.is_max ? "-INFINITY" : "0.0f");
    source += fmt::format("      for (int64_t k = 0; k < {}; ++k) {{\n", r.length);
    source += fmt::format("        float v = {};\n", r.element);
    source += r.is_max ? "        acc = (v != v || acc != acc) ? NAN : (v > acc ? v : acc);\n"
                       : "        acc += v;\n";
    source += "      }\n";
    source += r.scale == 1.0 ? fmt::format("      {}[g] = acc;\n", r.array)
                             : fmt::format("      {}[g] = acc * {:.9g}f;\n", r.array, r.scale);
    source += "    }\n";
  }
  for (size_t o = 0; o < body.outputs.size(); ++o) {
    const RowOutput& out = body.outputs[o];
    source += fmt::format("    for (int64_t i = 0; i < {}; ++i) {{\n", out.row_elements);
    source +=
        fmt::format("      tsr_st(out{}, row * {} + i, {});\n", o, out.row_elements, out.element);
    source += "    }\n";
  }
  source += "  }\n}\n";
  return source;
}

}  // namespace tessera
