#include "models/loaders/safetensors.h"

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/json_input.h"
#include "runtime/check.h"
#include "runtime/checked_math.h"

namespace tessera::loaders {
namespace {

// Shapes past these are corruption: no framework writes more dims, nor a dim of 2^48 elements.
constexpr size_t kMaxDims = 8;
constexpr uint64_t kMaxSize = uint64_t{1} << 48;

std::optional<DType> parse_supported_dtype(const std::string& name) {
  if (name == "F32") return DType::f32;
  if (name == "F16") return DType::f16;
  if (name == "BF16") return DType::bf16;
  if (name == "I32") return DType::i32;
  if (name == "I64") return DType::i64;
  if (name == "F8_E4M3") return DType::f8_e4m3;
  return std::nullopt;
}

// Bits per element of every dtype the safetensors format defines (0: not one), so that the byte
// size of tensors this loader will not convert is checked too.
size_t spec_element_bits(const std::string& name) {
  static const std::map<std::string, size_t> bits = {
      {"F64", 64},    {"F32", 32},    {"F16", 16},    {"BF16", 16},   {"I64", 64},
      {"I32", 32},    {"I16", 16},    {"I8", 8},      {"U64", 64},    {"U32", 32},
      {"U16", 16},    {"U8", 8},      {"BOOL", 8},    {"F8_E4M3", 8}, {"F8_E5M2", 8},
      {"F8_E8M0", 8}, {"F6_E2M3", 6}, {"F6_E3M2", 6}, {"F4", 4},      {"C64", 64}};
  auto it = bits.find(name);
  return it == bits.end() ? 0 : it->second;
}

uint64_t read_u64_le(const std::byte* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<uint8_t>(bytes[i]);
  return value;
}

SafetensorsEntry parse_entry(const std::string& path, const std::string& name,
                             const nlohmann::json& info, size_t data_size) {
  TESSERA_REQUIRE(info.is_object() && info.contains("dtype") && info.contains("shape") &&
                      info.contains("data_offsets"),
                  "{}: header entry for tensor '{}' must be an object with dtype, shape and "
                  "data_offsets",
                  path, name);
  SafetensorsEntry entry;
  entry.name = name;
  TESSERA_REQUIRE(info["dtype"].is_string(), "{}: tensor '{}': dtype must be a string", path, name);
  entry.dtype_name = info["dtype"].get<std::string>();
  entry.dtype = parse_supported_dtype(entry.dtype_name);
  const nlohmann::json& shape = info["shape"];
  TESSERA_REQUIRE(shape.is_array(), "{}: tensor '{}': shape must be an array", path, name);
  TESSERA_REQUIRE(shape.size() <= kMaxDims, "{}: tensor '{}': shape {} has more than {} dims", path,
                  name, json_excerpt(shape), kMaxDims);
  for (const nlohmann::json& size : shape) {
    TESSERA_REQUIRE(size.is_number_unsigned() && size.get<uint64_t>() <= kMaxSize,
                    "{}: tensor '{}': shape {} must hold integers in 0..{}", path, name,
                    json_excerpt(shape), kMaxSize);
    entry.shape.push_back(size.get<int64_t>());
  }
  const nlohmann::json& offsets = info["data_offsets"];
  TESSERA_REQUIRE(offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() &&
                      offsets[1].is_number_unsigned(),
                  "{}: tensor '{}': data_offsets must be two non-negative integers, got {}", path,
                  name, json_excerpt(offsets));
  entry.begin = offsets[0].get<uint64_t>();
  entry.end = offsets[1].get<uint64_t>();
  TESSERA_REQUIRE(entry.begin <= entry.end, "{}: tensor '{}': data_offsets [{}, {}] are reversed",
                  path, name, entry.begin, entry.end);
  TESSERA_REQUIRE(entry.end <= data_size,
                  "{}: tensor '{}': data_offsets [{}, {}] run past the end of the data section "
                  "({} bytes); the file is truncated or corrupt",
                  path, name, entry.begin, entry.end, data_size);
  const size_t bits = spec_element_bits(entry.dtype_name);
  TESSERA_REQUIRE(bits != 0,
                  "{}: tensor '{}': dtype '{}' is not a safetensors dtype; valid: F64, F32, F16, "
                  "BF16, I64, I32, I16, I8, U64, U32, U16, U8, BOOL, F8_E4M3, F8_E5M2, F8_E8M0, "
                  "F6_E2M3, F6_E3M2, F4, C64",
                  path, name, entry.dtype_name.substr(0, 64));
  // Sub-byte dtypes pack their elements; the last byte may be partly used.
  const std::optional<int64_t> total_bits = checked_nbytes(entry.shape, bits);
  const std::optional<int64_t> expected =
      total_bits ? std::optional<int64_t>((*total_bits + 7) / 8) : std::nullopt;
  TESSERA_REQUIRE(expected && static_cast<uint64_t>(*expected) == entry.end - entry.begin,
                  "{}: tensor '{}': {} {} needs {} bytes but data_offsets [{}, {}] hold {}", path,
                  name, entry.dtype_name, shape_str(entry.shape),
                  expected ? fmt::format("{}", *expected) : std::string("more than 2^60"),
                  entry.begin, entry.end, entry.end - entry.begin);
  return entry;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path)
    : file_(std::make_unique<MappedFile>(path)) {
  const size_t file_size = file_->size();
  TESSERA_REQUIRE(file_size >= 8,
                  "{}: {} bytes is too small for a safetensors file (it starts with an 8-byte "
                  "header length)",
                  path, file_size);
  const uint64_t header_length = read_u64_le(file_->data());
  TESSERA_REQUIRE(header_length <= file_size - 8,
                  "{}: the header length {} runs past the end of the file ({} bytes); the file is "
                  "truncated or not safetensors",
                  path, header_length, file_size);
  const char* header_text = reinterpret_cast<const char*>(file_->data() + 8);
  const nlohmann::json header =
      parse_json(std::string_view(header_text, header_length), path + " (the safetensors header)");
  TESSERA_REQUIRE(header.is_object(), "{}: the safetensors header must be a JSON object", path);
  data_section_ = file_->data() + 8 + header_length;
  data_size_ = file_size - 8 - header_length;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      TESSERA_REQUIRE(info.is_object(), "{}: __metadata__ must be an object", path);
      for (const auto& [key, value] : info.items())
        metadata_[key] = value.is_string() ? value.get<std::string>() : json_excerpt(value);
      continue;
    }
    entries_.emplace(name, parse_entry(path, name, info, data_size_));
  }
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

StoredTensor SafetensorsFile::stored(const SafetensorsEntry& entry) const {
  TESSERA_REQUIRE(entry.dtype.has_value(),
                  "{}: tensor '{}' has dtype {}, which is not supported; supported: F32, F16, "
                  "BF16, I32, I64, F8_E4M3",
                  path(), entry.name, entry.dtype_name);
  return StoredTensor{data_section_ + entry.begin, *entry.dtype, entry.shape};
}

Tensor SafetensorsFile::read(const std::string& name) const {
  const SafetensorsEntry* entry = find(name);
  TESSERA_REQUIRE(entry != nullptr, "{}: no tensor named '{}'", path(), name);
  StoredTensor bytes = stored(*entry);
  Tensor out = Tensor::empty(bytes.shape, bytes.dtype, kCPU);
  if (out.nbytes()) std::memcpy(out.data_ptr(), bytes.data, out.nbytes());
  return out;
}

const char* safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "F32";
    case DType::f16:
      return "F16";
    case DType::bf16:
      return "BF16";
    case DType::i32:
      return "I32";
    case DType::i64:
      return "I64";
    case DType::f8_e4m3:
      return "F8_E4M3";
    default:
      break;
  }
  throw Error(
      fmt::format("safetensors cannot store {} tensors; dequantize them first", dtype_name(dtype)));
}

void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<Tensor> host;
  size_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    host.push_back(tensor.to(kCPU).contiguous());
    const size_t bytes = host.back().nbytes();
    header[name] = {{"dtype", safetensors_dtype_name(tensor.dtype())},
                    {"shape", tensor.sizes()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data section 8-byte aligned
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  TESSERA_REQUIRE(out.good(), "{}: cannot open for writing", path);
  const uint64_t length = text.size();
  char length_bytes[8];
  for (int i = 0; i < 8; ++i) length_bytes[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  out.write(length_bytes, 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const Tensor& tensor : host)
    out.write(static_cast<const char*>(tensor.data_ptr()),
              static_cast<std::streamsize>(tensor.nbytes()));
  TESSERA_REQUIRE(out.good(), "{}: write failed", path);
}

}  // namespace tessera::loaders
