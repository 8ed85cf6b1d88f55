// Sample cases for every op (the OpInfo sample_inputs idea): input specs (shape, dtype, value
// kind, memory layout) and attributes. The op conformance test runs each one on every device and
// compares with the float64 reference (support/reference.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/attributes.h"
#include "runtime/dtype.h"

namespace tessera::test {

// The values an input is filled with (random, from a seeded generator; never all zeros).
enum class ValueKind {
  general,         // uniform in [-2, 2]; ints uniform in [-100, 100]
  positive,        // uniform in [0.1, 4] (log, sqrt, rsqrt, fractional powers)
  away_from_zero,  // +-[0.5, 2] (divisors)
  wide,            // +-10^[-6, 4.8] (casts: f16 subnormals up to near f16's max); ints in +-3000
  large,           // uniform in [-100, 100] (softmax stability, saturating activations)
  unit,            // uniform in [-1, 1] (cos/sin tables)
  ties,            // drawn from {-1.5, -0.5, 0.5, 1.5}: many equal values (max, argmax)
  ids,             // integers in [0, id_limit)
  condition,       // half 0, half nonzero in {1, -1, 2, 7} (where: nonzero is true)
};

// How an input sits in memory; the op sees the same values whichever it is.
enum class Layout {
  contiguous,
  transposed,      // stored with the last two dims swapped, then transposed back
  step_slice,      // every second element of a wider last dim, starting at 1 (offset, stride 2)
  broadcast_rows,  // dim 0 stored once and expanded (stride 0)
};

struct InputSpec {
  std::vector<int64_t> shape;
  DType dtype = DType::f32;
  ValueKind kind = ValueKind::general;
  int64_t id_limit = 0;  // for ValueKind::ids
  Layout layout = Layout::contiguous;

  std::string str() const;  // "f32[3, 5] (transposed, positive)"
};

struct OpSample {
  std::string op;
  std::vector<InputSpec> inputs;
  Attributes attributes;
  // Multiplies the tolerances: for long accumulations (K = 4097) whose rounding error grows.
  double tolerance_scale = 1.0;
  // The op whose float64 reference defines the expected result; empty means `op`. Lets a
  // test-only op claim the semantics of a real one.
  std::string reference_op;

  const std::string& reference_name() const { return reference_op.empty() ? op : reference_op; }
  std::string name() const;  // "add(f32[3, 1], f32[1, 4])", attributes in braces when set
};

// The samples of one op; empty when the table has none.
std::vector<OpSample> op_samples(const std::string& op);
// Every sample of every op, ordered by op name.
std::vector<OpSample> all_op_samples();
// Names of the ops the table covers.
std::vector<std::string> ops_with_samples();
// Registered ops this table deliberately leaves to another test, with where they are tested.
const std::map<std::string, std::string>& ops_tested_elsewhere();
// Ops registered only by tests (the checker's own self-test) start with this prefix.
inline constexpr const char* kTestOnlyOpPrefix = "test_only_";
bool is_test_only_op(const std::string& name);

const char* value_kind_name(ValueKind kind);
const char* layout_name(Layout layout);

}  // namespace tessera::test
