// Fuzz target: a GGUF file, read by GgufFile (header, typed metadata, tensor infos, every
// supported tensor copied out, quantized ones in their blocks), loaded as a model and as its
// embedded tokenizer, which encodes and decodes a short text. The custom mutator parses the layout
// (counts, typed key/values, tensor dims, types and offsets, aligned data) and mutates those fields
// directly, falling back on byte mutations when the input does not parse.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "models/loaders/gguf.h"
#include "models/model_weights.h"
#include "models/tokenizer.h"
#include "runtime/check.h"

using namespace tessera;

namespace {

// ---- A lenient GGUF reader and writer for the mutator ----

struct Reader {
  const uint8_t* data;
  size_t size;
  size_t at = 0;
  bool ok = true;

  template <typename T>
  T get() {
    T value{};
    if (size - at < sizeof(T)) {
      ok = false;
      return value;
    }
    std::memcpy(&value, data + at, sizeof(T));
    at += sizeof(T);
    return value;
  }
  std::string bytes(uint64_t count) {
    if (count > size - at) {
      ok = false;
      return {};
    }
    std::string out(reinterpret_cast<const char*>(data + at), count);
    at += count;
    return out;
  }
  std::string string() { return bytes(get<uint64_t>()); }
};

size_t scalar_size(uint32_t type) {
  static const size_t sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  return type < std::size(sizes) ? sizes[type] : 0;
}

// Skips one value of `type`; false when it does not fit or is not a GGUF type.
bool skip_value(Reader& reader, uint32_t type, int depth = 0) {
  if (type == 8) {
    reader.string();
  } else if (type == 9) {
    const uint32_t element = reader.get<uint32_t>();
    const uint64_t count = reader.get<uint64_t>();
    if (!reader.ok || depth > 0 || count > reader.size - reader.at) return false;
    for (uint64_t i = 0; i < count && reader.ok; ++i)
      if (!skip_value(reader, element, depth + 1)) return false;
  } else if (size_t size = scalar_size(type); size > 0) {
    reader.bytes(size);
  } else {
    return false;
  }
  return reader.ok;
}

struct KeyValue {
  std::string key;
  uint32_t type;
  std::string value;  // encoded, as in the file
};

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> dims;
  uint32_t type;
  uint64_t offset;
};

struct Gguf {
  uint32_t magic = 0, version = 0;
  uint64_t tensor_count = 0, metadata_count = 0;
  std::vector<KeyValue> metadata;
  std::vector<TensorInfo> tensors;
  std::string data;

  uint64_t alignment() const {
    for (const KeyValue& item : metadata) {
      if (item.key != "general.alignment" || item.type != 4 || item.value.size() != 4) continue;
      uint32_t value;
      std::memcpy(&value, item.value.data(), 4);
      if (value > 0 && value <= 4096 && (value & (value - 1)) == 0) return value;
    }
    return 32;
  }
};

bool parse(const uint8_t* data, size_t size, Gguf& out) {
  Reader reader{data, size};
  out.magic = reader.get<uint32_t>();
  out.version = reader.get<uint32_t>();
  out.tensor_count = reader.get<uint64_t>();
  out.metadata_count = reader.get<uint64_t>();
  if (!reader.ok || out.tensor_count > 4096 || out.metadata_count > 4096) return false;
  for (uint64_t i = 0; i < out.metadata_count; ++i) {
    KeyValue item;
    item.key = reader.string();
    item.type = reader.get<uint32_t>();
    const size_t start = reader.at;
    if (!reader.ok || !skip_value(reader, item.type)) return false;
    item.value.assign(reinterpret_cast<const char*>(data + start), reader.at - start);
    out.metadata.push_back(std::move(item));
  }
  for (uint64_t i = 0; i < out.tensor_count; ++i) {
    TensorInfo info;
    info.name = reader.string();
    const uint32_t dims = reader.get<uint32_t>();
    if (!reader.ok || dims > 8) return false;
    for (uint32_t d = 0; d < dims; ++d) info.dims.push_back(reader.get<uint64_t>());
    info.type = reader.get<uint32_t>();
    info.offset = reader.get<uint64_t>();
    if (!reader.ok) return false;
    out.tensors.push_back(std::move(info));
  }
  const uint64_t alignment = out.alignment();
  const size_t data_start = (reader.at + alignment - 1) / alignment * alignment;
  if (data_start < size)
    out.data.assign(reinterpret_cast<const char*>(data + data_start), size - data_start);
  return true;
}

template <typename T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

void put_string(std::string& out, const std::string& text) {
  put<uint64_t>(out, text.size());
  out += text;
}

std::string serialize(const Gguf& file) {
  std::string out;
  put(out, file.magic);
  put(out, file.version);
  put(out, file.tensor_count);
  put(out, file.metadata_count);
  for (const KeyValue& item : file.metadata) {
    put_string(out, item.key);
    put(out, item.type);
    out += item.value;
  }
  for (const TensorInfo& info : file.tensors) {
    put_string(out, info.name);
    put<uint32_t>(out, static_cast<uint32_t>(info.dims.size()));
    for (uint64_t dim : info.dims) put(out, dim);
    put(out, info.type);
    put(out, info.offset);
  }
  const uint64_t alignment = file.alignment();
  out.append((alignment - out.size() % alignment) % alignment, '\0');
  out += file.data;
  return out;
}

// A value of `type` (a scalar integer type, else uint64) holding `number`, truncated to its width.
std::string encoded_integer(uint32_t type, uint64_t number) {
  const size_t size = scalar_size(type) ? scalar_size(type) : 8;
  std::string out(reinterpret_cast<const char*>(&number), size);
  return out;
}

void mutate_value(KeyValue& item, std::minstd_rand& random) {
  uint64_t near = item.value.size();
  if (item.value.size() >= 8) std::memcpy(&near, item.value.data(), 8);
  switch (random() % 4) {
    case 0:  // another type, same bytes
      item.type = random() % 14;
      return;
    case 1:  // a number of the value's width (a string's or an array's length field)
      if (item.value.size() >= 8 && (item.type == 8 || item.type == 9)) {
        const size_t at = item.type == 9 ? 4 : 0;
        if (item.value.size() >= at + 8) {
          const uint64_t number = fuzz::interesting_number(random, near);
          std::memcpy(item.value.data() + at, &number, 8);
        }
        return;
      }
      [[fallthrough]];
    case 2:
      if (scalar_size(item.type) > 0 && item.type != 7) {
        item.value = encoded_integer(item.type, fuzz::interesting_number(random, near));
        return;
      }
      [[fallthrough]];
    default:  // an array's element type
      if (item.type == 9 && item.value.size() >= 4) {
        const uint32_t element = random() % 14;
        std::memcpy(item.value.data(), &element, 4);
      }
      return;
  }
}

void mutate_tensor(TensorInfo& info, std::minstd_rand& random) {
  // Float, integer, every quantized type the loader reads, and ones it refuses (Q8_1, IQ4_XS, F64).
  static const uint32_t types[] = {0,  1,  30, 26, 27, 2, 3,  6,  7, 8,
                                   10, 11, 12, 13, 14, 9, 23, 28, 99};
  switch (random() % 4) {
    case 0:
      if (info.dims.empty() || random() % 4 == 0) {
        if (random() % 2 || info.dims.empty()) {
          info.dims.push_back(fuzz::interesting_number(random, 1));
        } else {
          info.dims.pop_back();
        }
      } else {
        uint64_t& dim = info.dims[random() % info.dims.size()];
        dim = fuzz::interesting_number(random, dim);
      }
      return;
    case 1:
      info.type =
          random() % 4 ? types[random() % std::size(types)] : static_cast<uint32_t>(random());
      return;
    case 2:
      info.offset = random() % 2 ? fuzz::interesting_number(random, info.offset)
                                 : (info.offset + 32 * (random() % 8)) & ~uint64_t{31};
      return;
    default:
      info.name = random() % 2 ? info.name + "x" : "output.weight";
      return;
  }
}

// Keys whose values size the model: set to numbers that break size arithmetic.
const char* const kSizingKeys[] = {
    "llama.block_count",          "llama.embedding_length",        "llama.feed_forward_length",
    "llama.attention.head_count", "llama.attention.head_count_kv", "llama.context_length",
    "llama.attention.key_length", "llama.rope.dimension_count",    "llama.vocab_size",
    "general.alignment",          "tokenizer.ggml.bos_token_id",   "tokenizer.ggml.eos_token_id"};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch_file(
      "model.gguf", std::string_view(reinterpret_cast<const char*>(data), size));
  fuzz::expect_clean_failure(
      [&] {
        loaders::GgufFile file(path);
        for (const loaders::GgufTensorInfo& info : file.tensors()) {
          // Quantized tensors are copied in their blocks (1-D ones dequantized), the rest cast.
          const std::optional<DType> dtype = loaders::ggml_type_dtype(info.ggml_type);
          if (dtype && (is_floating(*dtype) || is_quantized(*dtype)))
            loaders::materialize(file.stored(info), LoadOptions{});
        }
        if (file.has("tokenizer.ggml.tokens")) file.tokenizer_metadata();
      },
      {path});
  fuzz::expect_clean_failure([&] { load_model(path, LoadOptions{}); }, {path});
  fuzz::expect_clean_failure(
      [&] {
        const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(path);
        const std::vector<int32_t> ids = tokenizer->encode("Hello <s> w\xc3\xb6rld  12", true);
        tokenizer->decode(ids, false);
      },
      {path});
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  std::minstd_rand random(seed);
  Gguf file;
  if (random() % 8 == 0 || !parse(data, size, file)) return LLVMFuzzerMutate(data, size, max_size);
  switch (random() % 7) {
    case 0:
      (random() % 2 ? file.tensor_count : file.metadata_count) =
          fuzz::interesting_number(random, file.tensor_count);
      break;
    case 1:
    case 2:
      if (file.metadata.empty()) return LLVMFuzzerMutate(data, size, max_size);
      mutate_value(file.metadata[random() % file.metadata.size()], random);
      break;
    case 3:
      if (file.tensors.empty()) return LLVMFuzzerMutate(data, size, max_size);
      mutate_tensor(file.tensors[random() % file.tensors.size()], random);
      break;
    case 4: {  // a key/value or tensor info dropped or repeated, its count kept or updated
      const bool tensors = random() % 2 && !file.tensors.empty();
      if (tensors) {
        const size_t index = random() % file.tensors.size();
        if (random() % 2) {
          file.tensors.push_back(file.tensors[index]);
        } else {
          file.tensors.erase(file.tensors.begin() + static_cast<std::ptrdiff_t>(index));
        }
        if (random() % 2) file.tensor_count = file.tensors.size();
      } else if (!file.metadata.empty()) {
        const size_t index = random() % file.metadata.size();
        if (random() % 2) {
          file.metadata.push_back(file.metadata[index]);
        } else {
          file.metadata.erase(file.metadata.begin() + static_cast<std::ptrdiff_t>(index));
        }
        if (random() % 2) file.metadata_count = file.metadata.size();
      }
      break;
    }
    case 5: {  // a sizing key set to a breaking number, in one of the integer types
      const std::string key = kSizingKeys[random() % std::size(kSizingKeys)];
      static const uint32_t integer_types[] = {4, 5, 10, 11, 0, 2};
      const uint32_t type = integer_types[random() % std::size(integer_types)];
      KeyValue* found = nullptr;
      for (KeyValue& item : file.metadata)
        if (item.key == key) found = &item;
      if (found == nullptr) {
        file.metadata.push_back({key, type, {}});
        file.metadata_count = file.metadata.size();
        found = &file.metadata.back();
      }
      found->type = type;
      found->value = encoded_integer(type, fuzz::interesting_number(random, 1));
      break;
    }
    default:
      file.data.resize(random() % (file.data.size() + 64));
      break;
  }
  return fuzz::store_mutation(serialize(file), data, size, max_size);
}
