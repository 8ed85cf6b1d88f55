#include "runtime/dtype.h"

#include "runtime/check.h"
#include "runtime/checked_math.h"

namespace tessera {

size_t element_size(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return 4;
    case DType::f16:
      return 2;
    case DType::bf16:
      return 2;
    case DType::i32:
      return 4;
    case DType::i64:
      return 8;
    case DType::f8_e4m3:
      return 1;
    default:
      break;
  }
  TESSERA_CHECK(!is_quantized(dtype),
                "element_size of quantized dtype {}: it is stored in blocks (storage_bytes)",
                dtype_name(dtype));
  TESSERA_CHECK(false, "unknown dtype {}", static_cast<int>(dtype));
}

namespace {

// A plain dtype as blocks of one element.
QuantizedBlock block_layout(DType dtype) {
  if (!is_quantized(dtype)) return {1, static_cast<int64_t>(element_size(dtype))};
  return quantized_block(dtype);
}

}  // namespace

int64_t block_elements(DType dtype) {
  return block_layout(dtype).elements;
}

size_t block_bytes(DType dtype) {
  return static_cast<size_t>(block_layout(dtype).bytes);
}

std::optional<int64_t> checked_storage_bytes(DType dtype, int64_t count) {
  const QuantizedBlock layout = block_layout(dtype);
  if (count < 0 || count % layout.elements != 0) return std::nullopt;
  return checked_multiply(count / layout.elements, layout.bytes);
}

int64_t storage_bytes(DType dtype, int64_t count) {
  const std::optional<int64_t> bytes = checked_storage_bytes(dtype, count);
  TESSERA_CHECK(bytes.has_value(), "{} elements of {} are not whole blocks of {} or overflow",
                count, dtype_name(dtype), block_elements(dtype));
  return *bytes;
}

void throw_quantized_visit(DType dtype) {
  if (dtype == DType::f8_e4m3) {
    throw Error(
        "dtype f8_e4m3 is FP8 with scales kept beside it: this operation needs a plain dtype; "
        "FP8 weights are read only through fp8_linear");
  }
  throw Error(fmt::format(
      "dtype {} is quantized (blocks of {}): this operation needs a plain dtype; it reads "
      "quantized weights only through linear and embedding",
      dtype_name(dtype), block_elements(dtype)));
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
    case DType::f8_e4m3:
      return "f8_e4m3";
    case DType::q4_0:
      return "q4_0";
    case DType::q4_1:
      return "q4_1";
    case DType::q5_0:
      return "q5_0";
    case DType::q5_1:
      return "q5_1";
    case DType::q8_0:
      return "q8_0";
    case DType::q2_k:
      return "q2_k";
    case DType::q3_k:
      return "q3_k";
    case DType::q4_k:
      return "q4_k";
    case DType::q5_k:
      return "q5_k";
    case DType::q6_k:
      return "q6_k";
  }
  return "?";
}

DType parse_dtype(std::string_view name) {
  if (name == "f32" || name == "float32" || name == "float") return DType::f32;
  if (name == "f16" || name == "float16" || name == "half") return DType::f16;
  if (name == "bf16" || name == "bfloat16") return DType::bf16;
  if (name == "i32" || name == "int32") return DType::i32;
  if (name == "i64" || name == "int64") return DType::i64;
  throw Error(fmt::format("unknown dtype '{}'; valid choices: f32, f16, bf16, i32, i64", name));
}

}  // namespace tessera
