#include "runtime/dtype.h"

#include "runtime/check.h"

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
  }
  TESSERA_CHECK(false, "unknown dtype {}", static_cast<int>(dtype));
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
