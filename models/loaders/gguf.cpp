#include "models/loaders/gguf.h"

#include <cstring>
#include <limits>

#include "runtime/check.h"
#include "runtime/checked_math.h"

namespace tessera::loaders {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint32_t kMaxDims = 4;             // GGML_MAX_DIMS

// Bounds-checked reads from the mapped file; errors say what was being read and where.
class Reader {
 public:
  Reader(const MappedFile& file) : file_(file) {}  // NOLINT

  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, file_.data() + position_, sizeof(T));
    position_ += sizeof(T);
    return value;
  }

  std::string read_string(const std::string& what) {
    const uint64_t length = read<uint64_t>(what + " (string length)");
    need(length, what);
    std::string text(reinterpret_cast<const char*>(file_.data() + position_), length);
    position_ += length;
    return text;
  }

  size_t position() const { return position_; }
  size_t remaining() const { return file_.size() - position_; }

 private:
  void need(uint64_t bytes, const std::string& what) {
    TESSERA_REQUIRE(bytes <= file_.size() - position_,
                    "{}: the file ends while reading {} (needs {} bytes at byte {}, the file has "
                    "{}); it is truncated or corrupt",
                    file_.path(), what, bytes, position_, file_.size());
  }

  const MappedFile& file_;
  size_t position_ = 0;
};

GgufScalar read_scalar(Reader& reader, GgufType type, const std::string& what,
                       const std::string& path) {
  switch (type) {
    case GgufType::uint8:
      return int64_t{reader.read<uint8_t>(what)};
    case GgufType::int8:
      return int64_t{reader.read<int8_t>(what)};
    case GgufType::uint16:
      return int64_t{reader.read<uint16_t>(what)};
    case GgufType::int16:
      return int64_t{reader.read<int16_t>(what)};
    case GgufType::uint32:
      return int64_t{reader.read<uint32_t>(what)};
    case GgufType::int32:
      return int64_t{reader.read<int32_t>(what)};
    case GgufType::uint64:
      return reader.read<uint64_t>(what);
    case GgufType::int64:
      return reader.read<int64_t>(what);
    case GgufType::float32:
      return double{reader.read<float>(what)};
    case GgufType::float64:
      return reader.read<double>(what);
    case GgufType::boolean: {
      const uint8_t value = reader.read<uint8_t>(what);
      TESSERA_REQUIRE(value <= 1, "{}: {}: a bool must be 0 or 1, got {}", path, what, value);
      return value == 1;
    }
    case GgufType::string:
      return reader.read_string(what);
    case GgufType::array:
      break;
  }
  throw Error(fmt::format("{}: {}: value type {} is not a GGUF scalar type", path, what,
                          static_cast<uint32_t>(type)));
}

GgufType read_type(Reader& reader, const std::string& what, const std::string& path) {
  const uint32_t raw = reader.read<uint32_t>(what + " (value type)");
  TESSERA_REQUIRE(raw <= static_cast<uint32_t>(GgufType::float64),
                  "{}: {} has unknown value type {} (GGUF defines 0..12)", path, what, raw);
  return static_cast<GgufType>(raw);
}

// Every array element is held as a GgufScalar (tens of bytes, whatever its stored size): the
// elements of all arrays together are capped, so a file cannot make the reader hold many times
// its own size. Real vocabularies take a few million (tokens, scores, types and merges).
constexpr uint64_t kMaxArrayElements = uint64_t{1} << 25;
// Far above what real files hold (tens of keys, thousands of tensors); a count past these is
// corruption, refused before anything is allocated for it.
constexpr uint64_t kMaxMetadataCount = uint64_t{1} << 16;
constexpr uint64_t kMaxTensorCount = uint64_t{1} << 20;

GgufValue read_value(Reader& reader, const std::string& key, const std::string& path,
                     uint64_t& elements_left) {
  GgufValue value;
  const std::string what = fmt::format("metadata '{}'", key);
  value.type = read_type(reader, what, path);
  if (value.type != GgufType::array) {
    value.scalar = read_scalar(reader, value.type, what, path);
    return value;
  }
  value.element_type = read_type(reader, what + " array", path);
  TESSERA_REQUIRE(value.element_type != GgufType::array,
                  "{}: {} is an array of arrays, which this reader does not support", path, what);
  const uint64_t count = reader.read<uint64_t>(what + " (array length)");
  // Every element takes at least one byte: a count beyond the file is corrupt, not a huge array.
  TESSERA_REQUIRE(count <= reader.remaining(),
                  "{}: {} claims {} elements but {} bytes of the file are left; the file is "
                  "truncated or corrupt",
                  path, what, count, reader.remaining());
  TESSERA_REQUIRE(count <= elements_left,
                  "{}: {} has {} elements, more than the {} array elements in all this reader "
                  "holds for a file; the file is corrupt",
                  path, what, count, kMaxArrayElements);
  elements_left -= count;
  value.elements.reserve(count);
  for (uint64_t i = 0; i < count; ++i)
    value.elements.push_back(read_scalar(reader, value.element_type, what, path));
  return value;
}

int64_t as_int(const GgufScalar& scalar, const std::string& path, const std::string& key) {
  if (const int64_t* value = std::get_if<int64_t>(&scalar)) return *value;
  if (const uint64_t* value = std::get_if<uint64_t>(&scalar)) {
    TESSERA_REQUIRE(*value <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                    "{}: metadata '{}' value {} does not fit int64", path, key, *value);
    return static_cast<int64_t>(*value);
  }
  throw Error(fmt::format("{}: metadata '{}' must be an integer", path, key));
}

double as_float(const GgufScalar& scalar, const std::string& path, const std::string& key) {
  if (const double* value = std::get_if<double>(&scalar)) return *value;
  if (std::holds_alternative<int64_t>(scalar) || std::holds_alternative<uint64_t>(scalar))
    return static_cast<double>(as_int(scalar, path, key));
  throw Error(fmt::format("{}: metadata '{}' must be a number", path, key));
}

}  // namespace

const char* gguf_type_name(GgufType type) {
  switch (type) {
    case GgufType::uint8:
      return "uint8";
    case GgufType::int8:
      return "int8";
    case GgufType::uint16:
      return "uint16";
    case GgufType::int16:
      return "int16";
    case GgufType::uint32:
      return "uint32";
    case GgufType::int32:
      return "int32";
    case GgufType::float32:
      return "float32";
    case GgufType::boolean:
      return "bool";
    case GgufType::string:
      return "string";
    case GgufType::array:
      return "array";
    case GgufType::uint64:
      return "uint64";
    case GgufType::int64:
      return "int64";
    case GgufType::float64:
      return "float64";
  }
  return "unknown";
}

std::string ggml_type_name(uint32_t ggml_type) {
  static const char* const names[] = {
      "F32",   "F16",        "Q4_0",       "Q4_1",       "Q4_2",     "Q4_3",     "Q5_0",
      "Q5_1",  "Q8_0",       "Q8_1",       "Q2_K",       "Q3_K",     "Q4_K",     "Q5_K",
      "Q6_K",  "Q8_K",       "IQ2_XXS",    "IQ2_XS",     "IQ3_XXS",  "IQ1_S",    "IQ4_NL",
      "IQ3_S", "IQ2_S",      "IQ4_XS",     "I8",         "I16",      "I32",      "I64",
      "F64",   "IQ1_M",      "BF16",       "Q4_0_4_4",   "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",
      "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4"};
  if (ggml_type < std::size(names)) return names[ggml_type];
  return fmt::format("type {}", ggml_type);
}

namespace {

// The ggml type ids this reader reads, with their dtypes (quantized ones keep their blocks).
constexpr std::pair<uint32_t, DType> kReadableTypes[] = {
    {0, DType::f32},   {1, DType::f16},   {30, DType::bf16}, {26, DType::i32},  {27, DType::i64},
    {2, DType::q4_0},  {3, DType::q4_1},  {6, DType::q5_0},  {7, DType::q5_1},  {8, DType::q8_0},
    {10, DType::q2_k}, {11, DType::q3_k}, {12, DType::q4_k}, {13, DType::q5_k}, {14, DType::q6_k}};

}  // namespace

std::optional<DType> ggml_type_dtype(uint32_t ggml_type) {
  for (const auto& [id, dtype] : kReadableTypes)
    if (id == ggml_type) return dtype;
  return std::nullopt;
}

std::string readable_ggml_types() {
  std::vector<std::string> names;
  for (const auto& [id, dtype] : kReadableTypes)
    if (dtype != DType::i32 && dtype != DType::i64) names.push_back(ggml_type_name(id));
  return fmt::format("{}", fmt::join(names, ", "));
}

GgufFile::GgufFile(const std::string& path) : file_(std::make_unique<MappedFile>(path)) {
  Reader reader(*file_);
  TESSERA_REQUIRE(file_->size() >= 4, "{}: {} bytes is too small for a GGUF file", path,
                  file_->size());
  const uint32_t magic = reader.read<uint32_t>("the magic");
  TESSERA_REQUIRE(magic == kGgufMagic,
                  "{}: bad magic 0x{:08x} (a GGUF file starts with \"GGUF\"); not a GGUF file",
                  path, magic);
  version_ = reader.read<uint32_t>("the version");
  TESSERA_REQUIRE(version_ == 2 || version_ == 3,
                  "{}: GGUF version {} is not supported; supported: 2, 3{}", path, version_,
                  version_ == 1       ? " (re-convert the model with a current llama.cpp)"
                  : version_ > 0xffff ? " (a big-endian file?)"
                                      : "");
  const uint64_t tensor_count = reader.read<uint64_t>("the tensor count");
  const uint64_t metadata_count = reader.read<uint64_t>("the metadata count");
  // A key takes at least 12 bytes and a tensor info at least 24: larger counts are corruption.
  TESSERA_REQUIRE(metadata_count <= file_->size() / 12 && tensor_count <= file_->size() / 24,
                  "{}: header claims {} metadata pairs and {} tensors, more than a {}-byte file "
                  "can hold; the file is truncated or corrupt",
                  path, metadata_count, tensor_count, file_->size());
  TESSERA_REQUIRE(metadata_count <= kMaxMetadataCount && tensor_count <= kMaxTensorCount,
                  "{}: header claims {} metadata pairs and {} tensors; this reader takes at most "
                  "{} and {}; the file is corrupt",
                  path, metadata_count, tensor_count, kMaxMetadataCount, kMaxTensorCount);

  uint64_t elements_left = kMaxArrayElements;
  for (uint64_t i = 0; i < metadata_count; ++i) {
    std::string key = reader.read_string(fmt::format("metadata key #{}", i));
    GgufValue value = read_value(reader, key, path, elements_left);
    TESSERA_REQUIRE(metadata_.count(key) == 0, "{}: metadata key '{}' appears twice", path, key);
    metadata_.emplace(std::move(key), std::move(value));
  }
  if (const GgufValue* alignment = find("general.alignment")) {
    TESSERA_REQUIRE(alignment->type == GgufType::uint32,
                    "{}: general.alignment must be a uint32, got {}", path,
                    gguf_type_name(alignment->type));
    const int64_t value = std::get<int64_t>(alignment->scalar);
    TESSERA_REQUIRE(value > 0 && (value & (value - 1)) == 0,
                    "{}: general.alignment {} must be a power of two", path, value);
    alignment_ = static_cast<uint32_t>(value);
  }

  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo info;
    info.name = reader.read_string(fmt::format("the name of tensor #{}", i));
    const std::string what = fmt::format("tensor '{}'", info.name);
    const uint32_t dims = reader.read<uint32_t>(what + " (dimension count)");
    TESSERA_REQUIRE(dims >= 1 && dims <= kMaxDims, "{}: {} has {} dims; GGUF allows 1..{}", path,
                    what, dims, kMaxDims);
    info.shape.resize(dims);
    for (uint32_t d = 0; d < dims; ++d) {
      const uint64_t size = reader.read<uint64_t>(what + " (dims)");
      TESSERA_REQUIRE(size <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max()) * 64,
                      "{}: {} has an impossible size {} in dim {}", path, what, size, d);
      info.shape[dims - 1 - d] = static_cast<int64_t>(size);  // fastest-first -> row-major
    }
    info.ggml_type = reader.read<uint32_t>(what + " (type)");
    info.offset = reader.read<uint64_t>(what + " (offset)");
    TESSERA_REQUIRE(info.offset % alignment_ == 0,
                    "{}: {} has data offset {}, not a multiple of the alignment {}", path, what,
                    info.offset, alignment_);
    TESSERA_REQUIRE(tensor_index_.count(info.name) == 0, "{}: {} appears twice", path, what);
    tensor_index_.emplace(info.name, tensors_.size());
    tensors_.push_back(std::move(info));
  }
  data_offset_ = (reader.position() + alignment_ - 1) / alignment_ * alignment_;

  for (const GgufTensorInfo& info : tensors_) {
    std::optional<DType> dtype = ggml_type_dtype(info.ggml_type);
    if (!dtype) continue;  // a type this reader cannot read: refused when read, naming it
    // A quantized row (the file's ne[0]) is whole blocks; the bytes are blocks times block bytes.
    TESSERA_REQUIRE(!is_quantized(*dtype) || info.shape.back() % block_elements(*dtype) == 0,
                    "{}: tensor '{}' is {} with rows of {} values, not whole blocks of {}; the "
                    "file is corrupt",
                    path, info.name, ggml_type_name(info.ggml_type), info.shape.back(),
                    block_elements(*dtype));
    const std::optional<int64_t> numel = checked_numel(info.shape);
    const std::optional<int64_t> bytes =
        numel ? checked_storage_bytes(*dtype, *numel) : std::optional<int64_t>{};
    TESSERA_REQUIRE(bytes.has_value(), "{}: tensor '{}' has shape {}, whose size overflows", path,
                    info.name, shape_str(info.shape));
    const std::optional<uint64_t> start = checked_add<uint64_t>(data_offset_, info.offset);
    const std::optional<uint64_t> end =
        start && bytes ? checked_add<uint64_t>(*start, static_cast<uint64_t>(*bytes))
                       : std::nullopt;
    TESSERA_REQUIRE(end && *end <= file_->size(),
                    "{}: tensor '{}' ({} {}) at data offset {} runs past the end of the file "
                    "({} bytes, data starts at {}); the file is truncated",
                    path, info.name, ggml_type_name(info.ggml_type), shape_str(info.shape),
                    info.offset, file_->size(), data_offset_);
  }
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufValue& GgufFile::require(const std::string& key) const {
  const GgufValue* value = find(key);
  TESSERA_REQUIRE(value != nullptr, "{}: required metadata '{}' is missing", path(), key);
  return *value;
}

int64_t GgufFile::get_int(const std::string& key) const {
  const GgufValue& value = require(key);
  TESSERA_REQUIRE(value.type != GgufType::array, "{}: metadata '{}' is an array, not an integer",
                  path(), key);
  return as_int(value.scalar, path(), key);
}

double GgufFile::get_float(const std::string& key) const {
  const GgufValue& value = require(key);
  TESSERA_REQUIRE(value.type != GgufType::array, "{}: metadata '{}' is an array, not a number",
                  path(), key);
  return as_float(value.scalar, path(), key);
}

bool GgufFile::get_bool(const std::string& key) const {
  const GgufValue& value = require(key);
  TESSERA_REQUIRE(value.type == GgufType::boolean, "{}: metadata '{}' must be a bool, got {}",
                  path(), key, gguf_type_name(value.type));
  return std::get<bool>(value.scalar);
}

std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue& value = require(key);
  TESSERA_REQUIRE(value.type == GgufType::string, "{}: metadata '{}' must be a string, got {}",
                  path(), key, gguf_type_name(value.type));
  return std::get<std::string>(value.scalar);
}

std::vector<int64_t> GgufFile::get_int_array(const std::string& key) const {
  const GgufValue& value = require(key);
  TESSERA_REQUIRE(value.type == GgufType::array, "{}: metadata '{}' must be an array, got {}",
                  path(), key, gguf_type_name(value.type));
  std::vector<int64_t> result;
  result.reserve(value.elements.size());
  for (const GgufScalar& element : value.elements) result.push_back(as_int(element, path(), key));
  return result;
}

std::vector<double> GgufFile::get_float_array(const std::string& key) const {
  const GgufValue& value = require(key);
  TESSERA_REQUIRE(value.type == GgufType::array, "{}: metadata '{}' must be an array, got {}",
                  path(), key, gguf_type_name(value.type));
  std::vector<double> result;
  result.reserve(value.elements.size());
  for (const GgufScalar& element : value.elements) result.push_back(as_float(element, path(), key));
  return result;
}

std::vector<std::string> GgufFile::get_string_array(const std::string& key) const {
  const GgufValue& value = require(key);
  TESSERA_REQUIRE(value.type == GgufType::array && value.element_type == GgufType::string,
                  "{}: metadata '{}' must be an array of strings", path(), key);
  std::vector<std::string> result;
  result.reserve(value.elements.size());
  for (const GgufScalar& element : value.elements) result.push_back(std::get<std::string>(element));
  return result;
}

int64_t GgufFile::get_int_or(const std::string& key, int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}

double GgufFile::get_float_or(const std::string& key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}

std::string GgufFile::get_string_or(const std::string& key, const std::string& fallback) const {
  return has(key) ? get_string(key) : fallback;
}

size_t GgufFile::array_size(const std::string& key) const {
  const GgufValue& value = require(key);
  TESSERA_REQUIRE(value.type == GgufType::array, "{}: metadata '{}' must be an array, got {}",
                  path(), key, gguf_type_name(value.type));
  return value.elements.size();
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

StoredTensor GgufFile::stored(const GgufTensorInfo& info) const {
  std::optional<DType> dtype = ggml_type_dtype(info.ggml_type);
  TESSERA_REQUIRE(dtype.has_value(),
                  "{}: tensor '{}' has type {}, which is not supported; supported: {} (re-quantize "
                  "the model to one of them with llama.cpp's llama-quantize, e.g. Q4_K_M)",
                  path(), info.name, ggml_type_name(info.ggml_type), readable_ggml_types());
  return StoredTensor{file_->data() + data_offset_ + info.offset, *dtype, info.shape};
}

GgufTokenizerMetadata GgufFile::tokenizer_metadata() const {
  TESSERA_REQUIRE(has("tokenizer.ggml.tokens"),
                  "{}: no embedded tokenizer (metadata tokenizer.ggml.tokens is missing)", path());
  GgufTokenizerMetadata tokenizer;
  tokenizer.model = get_string_or("tokenizer.ggml.model", "");
  tokenizer.pre = get_string_or("tokenizer.ggml.pre", "");
  tokenizer.tokens = get_string_array("tokenizer.ggml.tokens");
  if (has("tokenizer.ggml.scores"))
    for (double score : get_float_array("tokenizer.ggml.scores"))
      tokenizer.scores.push_back(static_cast<float>(score));
  if (has("tokenizer.ggml.token_type"))
    for (int64_t type : get_int_array("tokenizer.ggml.token_type"))
      tokenizer.token_types.push_back(static_cast<int32_t>(type));
  if (has("tokenizer.ggml.merges")) tokenizer.merges = get_string_array("tokenizer.ggml.merges");
  const size_t count = tokenizer.tokens.size();
  TESSERA_REQUIRE(tokenizer.scores.empty() || tokenizer.scores.size() == count,
                  "{}: tokenizer.ggml.scores has {} entries for {} tokens", path(),
                  tokenizer.scores.size(), count);
  TESSERA_REQUIRE(tokenizer.token_types.empty() || tokenizer.token_types.size() == count,
                  "{}: tokenizer.ggml.token_type has {} entries for {} tokens", path(),
                  tokenizer.token_types.size(), count);
  auto token_id = [&](const char* key) -> std::optional<int32_t> {
    if (!has(key)) return std::nullopt;
    const int64_t id = get_int(key);
    // llama.cpp writes -1 (as uint32 0xffffffff) for "no such token".
    if (id < 0 || id == 0xffffffffll) return std::nullopt;
    TESSERA_REQUIRE(id >= 0 && static_cast<size_t>(id) < count,
                    "{}: metadata '{}' = {} is not a token id (the vocabulary has {})", path(), key,
                    id, count);
    return static_cast<int32_t>(id);
  };
  tokenizer.bos_id = token_id("tokenizer.ggml.bos_token_id");
  tokenizer.eos_id = token_id("tokenizer.ggml.eos_token_id");
  tokenizer.unknown_id = token_id("tokenizer.ggml.unknown_token_id");
  tokenizer.padding_id = token_id("tokenizer.ggml.padding_token_id");
  if (has("tokenizer.ggml.add_bos_token"))
    tokenizer.add_bos = get_bool("tokenizer.ggml.add_bos_token");
  if (has("tokenizer.ggml.add_eos_token"))
    tokenizer.add_eos = get_bool("tokenizer.ggml.add_eos_token");
  tokenizer.chat_template = get_string_or("tokenizer.chat_template", "");
  return tokenizer;
}

}  // namespace tessera::loaders
