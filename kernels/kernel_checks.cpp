#include "kernels/kernel_checks.h"

#include "runtime/check.h"

namespace tessera {

void require_dtype(const char* op, const char* what, const Tensor& tensor, DType expected) {
  TESSERA_REQUIRE(tensor.dtype() == expected, "{}: {} has dtype {} but {} was expected", op, what,
                  dtype_name(tensor.dtype()), dtype_name(expected));
}

void require_sizes(const char* op, const char* what, const Tensor& tensor, const Shape& expected) {
  TESSERA_REQUIRE(tensor.sizes() == expected, "{}: {} has shape {} but {} was expected", op, what,
                  shape_str(tensor.sizes()), shape_str(expected));
}

void require_contiguous(const char* op, const char* what, const Tensor& tensor) {
  TESSERA_REQUIRE(tensor.numel() == 0 || tensor.is_contiguous(),
                  "{}: {} ({}) must be contiguous; make it contiguous first", op, what,
                  tensor.str());
}

void require_float_contiguous(const char* op, const char* what, const Tensor& tensor) {
  TESSERA_REQUIRE(is_floating(tensor.dtype()), "{}: {} has dtype {}; use f32, f16 or bf16", op,
                  what, dtype_name(tensor.dtype()));
  require_contiguous(op, what, tensor);
}

int64_t leading_numel(const Tensor& tensor) {
  int64_t count = 1;
  for (int64_t dim = 0; dim + 1 < tensor.dim(); ++dim) count *= tensor.size(dim);
  return count;
}

MatmulShape check_matmul(const Tensor& a, const Tensor& b, const Tensor& out) {
  require_float_contiguous("matmul", "a", a);
  require_float_contiguous("matmul", "b", b);
  require_dtype("matmul", "b", b, a.dtype());
  require_dtype("matmul", "output", out, a.dtype());
  require_contiguous("matmul", "output", out);
  TESSERA_REQUIRE(a.dim() >= 2 && (b.dim() == 2 || b.dim() == a.dim()),
                  "matmul: expected a [..., M, K] with b [K, N] or [..., K, N], got a {} and b {}",
                  shape_str(a.sizes()), shape_str(b.sizes()));
  MatmulShape shape;
  shape.m = a.size(-2);
  shape.k = a.size(-1);
  shape.n = b.size(-1);
  TESSERA_REQUIRE(b.size(-2) == shape.k, "matmul: a {} has K = {} but b {} has {} rows",
                  shape_str(a.sizes()), shape.k, shape_str(b.sizes()), b.size(-2));
  Shape expected = a.sizes();
  expected.back() = shape.n;
  require_sizes("matmul", "output", out, expected);
  shape.batched = b.dim() > 2;
  if (shape.batched) {
    const Shape batch_sizes(a.sizes().begin(), a.sizes().end() - 2);
    TESSERA_REQUIRE(Shape(b.sizes().begin(), b.sizes().end() - 2) == batch_sizes,
                    "matmul: the batch dims of a {} and b {} differ", shape_str(a.sizes()),
                    shape_str(b.sizes()));
    shape.batches = shape_numel(batch_sizes);
  } else {
    shape.m = leading_numel(a);  // one GEMM over all rows of a
  }
  return shape;
}

MatmulShape check_linear(const Tensor& x, const Tensor& weight, const Tensor* bias,
                         const Tensor& out) {
  require_float_contiguous("linear", "x", x);
  if (is_quantized(weight.dtype())) {
    // A quantized weight holds whole blocks along K; x and the output keep their float dtype.
    require_contiguous("linear", "weight", weight);
    TESSERA_REQUIRE(weight.dim() == 2 && weight.size(1) % block_elements(weight.dtype()) == 0,
                    "linear: quantized weight {} must be [N, K] with K a multiple of {}",
                    weight.str(), block_elements(weight.dtype()));
  } else {
    require_float_contiguous("linear", "weight", weight);
    require_dtype("linear", "weight", weight, x.dtype());
  }
  require_dtype("linear", "output", out, x.dtype());
  require_contiguous("linear", "output", out);
  TESSERA_REQUIRE(x.dim() >= 1 && weight.dim() == 2 && weight.size(1) == x.size(-1),
                  "linear: expected x [..., K] and weight [N, K], got x {} and weight {}",
                  shape_str(x.sizes()), shape_str(weight.sizes()));
  MatmulShape shape;
  shape.m = leading_numel(x);
  shape.n = weight.size(0);
  shape.k = weight.size(1);
  if (bias != nullptr) {
    require_float_contiguous("linear", "bias", *bias);
    require_dtype("linear", "bias", *bias, x.dtype());
    require_sizes("linear", "bias", *bias, Shape{shape.n});
  }
  Shape expected = x.sizes();
  expected.back() = shape.n;
  require_sizes("linear", "output", out, expected);
  return shape;
}

EmbeddingArgs check_embedding(const KernelArgs& args) {
  const Tensor& weight = args.inputs[0];
  const Tensor& ids = args.inputs[1];
  const Tensor& out = args.outputs[0];
  TESSERA_REQUIRE(weight.dim() == 2, "embedding: weight must be [V, D], got shape {}",
                  shape_str(weight.sizes()));
  TESSERA_REQUIRE(ids.dtype() == DType::i32 || ids.dtype() == DType::i64,
                  "embedding: ids have dtype {}; use i32 or i64", dtype_name(ids.dtype()));
  require_contiguous("embedding", "weight", weight);
  require_contiguous("embedding", "ids", ids);
  // A quantized table's rows come out dequantized, in f32.
  require_dtype("embedding", "output", out,
                is_quantized(weight.dtype()) ? DType::f32 : weight.dtype());
  Shape expected = ids.sizes();
  expected.push_back(weight.size(1));
  require_sizes("embedding", "output", out, expected);
  return EmbeddingArgs{weight,
                       ids,
                       out,
                       weight.size(0),
                       weight.size(1),
                       ids.numel(),
                       args.attributes.get_int("vocab_start")};
}

LinearArgs check_linear(const KernelArgs& args) {
  const Tensor* bias = args.inputs.size() == 3 ? &args.inputs[2] : nullptr;
  const MatmulShape shape = check_linear(args.inputs[0], args.inputs[1], bias, args.outputs[0]);
  return LinearArgs{args.inputs[0], args.inputs[1], bias, args.outputs[0], shape};
}

Fp8LinearArgs check_fp8_linear(const KernelArgs& args) {
  constexpr const char* kOp = "fp8_linear";
  const Tensor& x = args.inputs[0];
  const Tensor& weight = args.inputs[1];
  const Tensor& scale = args.inputs[2];
  const Tensor* input_scale = args.inputs.size() == 4 ? &args.inputs[3] : nullptr;
  const Tensor& out = args.outputs[0];
  require_float_contiguous(kOp, "x", x);
  require_dtype(kOp, "weight", weight, DType::f8_e4m3);
  require_dtype(kOp, "weight_scale", scale, DType::f32);
  require_dtype(kOp, "output", out, x.dtype());
  if (input_scale != nullptr) require_dtype(kOp, "input_scale", *input_scale, DType::f32);
  const std::pair<const char*, const Tensor*> roles[] = {{"weight", &weight},
                                                         {"weight_scale", &scale},
                                                         {"output", &out},
                                                         {"input_scale", input_scale}};
  for (const auto& [role, tensor] : roles) {
    if (tensor == nullptr) continue;
    require_contiguous(kOp, role, *tensor);
    TESSERA_REQUIRE(tensor->device() == x.device(), "{}: {} ({}) must be on {} with x", kOp, role,
                    tensor->str(), x.device().str());
  }
  TESSERA_REQUIRE(x.dim() >= 1 && weight.dim() == 2 && weight.size(1) == x.size(-1),
                  "{}: expected x [..., K] and weight [N, K], got {} and {}", kOp, x.str(),
                  weight.str());
  Fp8LinearArgs checked{x, weight, scale, input_scale, out};
  checked.m = leading_numel(x);
  checked.n = weight.size(0);
  checked.k = weight.size(1);
  TESSERA_REQUIRE(checked.k > 0, "{}: weight {} has no columns", kOp, weight.str());
  const int64_t row_blocks = (checked.n + kFp8Block - 1) / kFp8Block;
  const int64_t column_blocks = (checked.k + kFp8Block - 1) / kFp8Block;
  checked.block_scaled = scale.dim() == 2;
  const Shape expected_scale =
      checked.block_scaled ? Shape{row_blocks, column_blocks} : Shape{checked.n};
  TESSERA_REQUIRE(scale.sizes() == expected_scale,
                  "{}: weight_scale {} must be [{}] or [{}, {}] for weight {}", kOp, scale.str(),
                  checked.n, row_blocks, column_blocks, weight.str());
  checked.activation = parse_fp8_activation_scale(args.attributes.get_string("activation"));
  TESSERA_REQUIRE((checked.activation == Fp8ActivationScale::fixed) == (input_scale != nullptr),
                  "{}: activation {} with{} input_scale", kOp,
                  fp8_activation_scale_name(checked.activation),
                  input_scale != nullptr ? "" : "out");
  if (input_scale != nullptr) require_sizes(kOp, "input_scale", *input_scale, Shape{1});
  Shape expected = x.sizes();
  expected.back() = checked.n;
  require_sizes(kOp, "output", out, expected);
  return checked;
}

RotaryShape check_rotary_embedding(const KernelArgs& args, bool strided_rows) {
  constexpr const char* kOp = "rotary_embedding";
  const Tensor& positions = args.inputs[0];
  const Tensor& query = args.inputs[1];
  const Tensor& key = args.inputs[2];
  const Tensor& cache = args.inputs[3];
  const Tensor& query_out = args.outputs[0];
  const Tensor& key_out = args.outputs[1];
  for (const Tensor* tensor : {&positions, &query, &key, &cache, &query_out, &key_out}) {
    const bool rows = strided_rows && (tensor == &query || tensor == &key) && tensor->dim() == 2 &&
                      tensor->stride(1) == 1 && tensor->stride(0) >= tensor->size(1);
    TESSERA_REQUIRE(tensor->numel() == 0 || tensor->is_contiguous() || rows,
                    "{}: {} must be contiguous{}", kOp, tensor->str(),
                    strided_rows ? " (query and key: contiguous rows)" : "");
    TESSERA_REQUIRE(tensor->device() == query.device(), "{}: {} must be on {} with the query", kOp,
                    tensor->str(), query.device().str());
  }
  TESSERA_REQUIRE(positions.dtype() == DType::i32 || positions.dtype() == DType::i64,
                  "{}: positions have dtype {}; use i32 or i64", kOp,
                  dtype_name(positions.dtype()));
  TESSERA_REQUIRE(positions.dim() == 1 && query.dim() == 2 && key.dim() == 2 && cache.dim() == 2,
                  "{}: expected positions [T], query [T, Hq * head_size], key [T, Hk * head_size] "
                  "and cos_sin_cache [max_position, rot_dim], got {}, {}, {} and {}",
                  kOp, positions.str(), query.str(), key.str(), cache.str());
  const RotaryShape shape{positions.size(0), args.attributes.get_int("head_size"), cache.size(1),
                          cache.size(0), args.attributes.get_bool("is_neox", true)};
  TESSERA_REQUIRE(shape.head_size > 0 && shape.rot_dim % 2 == 0 &&
                      shape.rot_dim <= shape.head_size && query.size(1) % shape.head_size == 0 &&
                      key.size(1) % shape.head_size == 0,
                  "{}: head_size {} must divide the widths of query {} and key {}, and the cache's "
                  "rot_dim {} must be even and at most head_size",
                  kOp, shape.head_size, query.str(), key.str(), shape.rot_dim);
  TESSERA_REQUIRE(query.size(0) == shape.tokens && key.size(0) == shape.tokens &&
                      query_out.sizes() == query.sizes() && key_out.sizes() == key.sizes(),
                  "{}: query {}, key {} and the outputs {}, {} need one row per position ({})", kOp,
                  query.str(), key.str(), query_out.str(), key_out.str(), positions.str());
  TESSERA_REQUIRE(key.dtype() == query.dtype() && query_out.dtype() == query.dtype() &&
                      key_out.dtype() == query.dtype(),
                  "{}: key {} and the outputs must have the query's dtype {}", kOp, key.str(),
                  dtype_name(query.dtype()));
  return shape;
}

void check_take_sampled_ids(const Tensor& sampled, const Tensor& tokens, const Tensor& out) {
  TESSERA_REQUIRE(sampled.dtype() == DType::i32 || sampled.dtype() == DType::i64,
                  "take_sampled_ids: sampled ids have dtype {}; use i32 or i64",
                  dtype_name(sampled.dtype()));
  require_contiguous("take_sampled_ids", "sampled ids", sampled);
  require_dtype("take_sampled_ids", "token ids", tokens, DType::i32);
  require_contiguous("take_sampled_ids", "token ids", tokens);
  require_dtype("take_sampled_ids", "output", out, DType::i32);
  require_contiguous("take_sampled_ids", "output", out);
  require_sizes("take_sampled_ids", "output", out, tokens.sizes());
}

void check_apply_token_mask(const Tensor& masks, const Tensor& rows, const Tensor& logits) {
  require_dtype("apply_token_mask", "masks", masks, DType::i32);
  require_contiguous("apply_token_mask", "masks", masks);
  require_dtype("apply_token_mask", "rows", rows, DType::i32);
  require_contiguous("apply_token_mask", "rows", rows);
  require_dtype("apply_token_mask", "logits", logits, DType::f32);
  require_contiguous("apply_token_mask", "logits", logits);
  TESSERA_REQUIRE(masks.dim() == 2 && logits.dim() == 2 && rows.dim() == 2 && rows.size(0) == 2 &&
                      logits.size(1) <= 32 * masks.size(1),
                  "apply_token_mask: masks {} for rows {} do not fit logits {}", masks.str(),
                  rows.str(), logits.str());
}

}  // namespace tessera
