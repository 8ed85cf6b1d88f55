// GGUF (llama.cpp's model file), versions 2 and 3: a header, typed metadata key/values (arrays
// included), tensor infos, then tensor data aligned to general.alignment (default 32). The file
// is memory-mapped; tensor data is read in place. Tensor dims are stored fastest-first (ne[0] is
// the row length); GgufTensorInfo::shape is already reversed to row-major.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "models/loaders/mapped_file.h"
#include "models/loaders/stored_tensor.h"

namespace tessera::loaders {

// GGUF metadata value types, numbered as in the format.
enum class GgufType : uint32_t {
  uint8 = 0,
  int8 = 1,
  uint16 = 2,
  int16 = 3,
  uint32 = 4,
  int32 = 5,
  float32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  uint64 = 10,
  int64 = 11,
  float64 = 12,
};
const char* gguf_type_name(GgufType type);

// One scalar: every integer type widens to int64_t except uint64 (kept as uint64_t), floats to
// double.
using GgufScalar = std::variant<int64_t, uint64_t, double, bool, std::string>;

struct GgufValue {
  GgufType type = GgufType::uint8;
  GgufType element_type = GgufType::uint8;  // arrays only
  GgufScalar scalar;                        // non-arrays
  std::vector<GgufScalar> elements;         // arrays
};

struct GgufTensorInfo {
  std::string name;
  uint32_t ggml_type = 0;  // ggml_type: 0 F32, 1 F16, 30 BF16, 26 I32, 27 I64, others quantized
  Shape shape;             // row-major (the file's dims reversed)
  uint64_t offset = 0;     // from the start of the data section
};
// "F32", "Q4_K", ... ("type 99" for ids this reader does not know).
std::string ggml_type_name(uint32_t ggml_type);

// The tokenizer a GGUF file embeds (tokenizer.ggml.*), for the tokenizer factory.
struct GgufTokenizerMetadata {
  std::string model;  // tokenizer.ggml.model: "llama" (SentencePiece), "gpt2" (byte-level BPE)
  std::string pre;    // tokenizer.ggml.pre: the pre-tokenizer name ("llama-bpe", "qwen2"), or ""
  std::vector<std::string> tokens;
  std::vector<float> scores;         // empty when absent
  std::vector<int32_t> token_types;  // 1 normal, 2 unknown, 3 control, 4 user, 5 unused, 6 byte
  std::vector<std::string> merges;   // "a b" pairs, BPE only
  std::optional<int32_t> bos_id, eos_id, unknown_id, padding_id;
  std::optional<bool> add_bos, add_eos;
  std::string chat_template;  // tokenizer.chat_template, or ""
};

class GgufFile {
 public:
  // Parses the header, metadata and tensor infos; checks every readable tensor's data lies inside
  // the file (a quantized one: whole blocks per row). Errors name the file and the field or
  // tensor.
  explicit GgufFile(const std::string& path);

  const std::string& path() const { return file_->path(); }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }

  // Metadata.
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const GgufValue* find(const std::string& key) const;
  bool has(const std::string& key) const { return find(key) != nullptr; }
  // Typed getters: throw naming the file and key when absent or of another type. Integer getters
  // accept any integer type (range-checked); float getters accept floats and integers.
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  std::string get_string(const std::string& key) const;
  std::vector<int64_t> get_int_array(const std::string& key) const;
  std::vector<double> get_float_array(const std::string& key) const;
  std::vector<std::string> get_string_array(const std::string& key) const;
  int64_t get_int_or(const std::string& key, int64_t fallback) const;
  double get_float_or(const std::string& key, double fallback) const;
  std::string get_string_or(const std::string& key, const std::string& fallback) const;
  // Number of elements of an array value.
  size_t array_size(const std::string& key) const;

  // Tensors, in file order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  // The bytes of a readable tensor (ggml_type_dtype); throws naming the tensor, its type and the
  // readable types otherwise.
  StoredTensor stored(const GgufTensorInfo& info) const;

  // tokenizer.ggml.*; throws naming the file when it has no tokenizer.ggml.tokens.
  GgufTokenizerMetadata tokenizer_metadata() const;

 private:
  const GgufValue& require(const std::string& key) const;

  std::unique_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  size_t data_offset_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

// The DType of a ggml type id when Tessera can read it: F32, F16, BF16, I32, I64, and the
// quantized Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K (kept in their blocks).
std::optional<DType> ggml_type_dtype(uint32_t ggml_type);
// The readable float and quantized type names, "F32, F16, ..., Q6_K", for error messages.
std::string readable_ggml_types();

}  // namespace tessera::loaders
