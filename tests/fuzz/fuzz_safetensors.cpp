// Fuzz target: a safetensors file. It is read on its own (header, entries, every supported
// tensor copied out) and as the weights of a Hugging Face folder with a fixed tiny Llama
// config.json, so that shape and dtype checks against the config run too. The custom mutator
// knows the layout (an 8-byte header length, a JSON header of dtype/shape/data_offsets entries,
// the data) and mutates lengths, offsets, shapes and dtypes directly.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <random>

#include "fuzz/fuzz_support.h"
#include "fuzz/tiny_model.h"
#include "models/loaders/safetensors.h"
#include "models/model_weights.h"

using namespace tessera;
using nlohmann::json;

namespace {

std::string folder;

uint64_t read_u64(const uint8_t* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

std::string u64_bytes(uint64_t value) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  return bytes;
}

// A number for a shape or offset field: mostly interesting ones, sometimes negative or a float.
json numeric_field(std::minstd_rand& random, uint64_t near) {
  switch (random() % 8) {
    case 0:
      return -static_cast<int64_t>(random() % 3) - 1;
    case 1:
      return 1.5;
    default:
      return fuzz::interesting_number(random, near);
  }
}

void mutate_entry(json& entry, std::minstd_rand& random, uint64_t data_size) {
  static const char* const dtypes[] = {"F32",     "F16", "BF16", "I32",     "I64",
                                       "F64",     "U8",  "BOOL", "F8_E4M3", "F4",
                                       "F6_E2M3", "C64", "X",    "",        "f32"};
  switch (random() % 4) {
    case 0: {  // data_offsets
      if (!entry.contains("data_offsets") || !entry["data_offsets"].is_array() ||
          entry["data_offsets"].size() != 2) {
        entry["data_offsets"] = json::array({0, data_size});
        return;
      }
      json& offset = entry["data_offsets"][random() % 2];
      offset =
          numeric_field(random, offset.is_number_unsigned() ? offset.get<uint64_t>() : data_size);
      return;
    }
    case 1: {  // a shape dim, or a dim more or less
      json& shape = entry["shape"];
      if (!shape.is_array()) shape = json::array();
      if (shape.empty() || random() % 4 == 0) {
        shape.push_back(numeric_field(random, 1));
      } else if (random() % 4 == 0) {
        shape.erase(shape.size() - 1);
      } else {
        json& dim = shape[random() % shape.size()];
        dim = numeric_field(random, dim.is_number_unsigned() ? dim.get<uint64_t>() : 1);
      }
      return;
    }
    case 2:
      entry["dtype"] = dtypes[random() % std::size(dtypes)];
      return;
    default:  // a field missing or of the wrong kind
      entry[random() % 2 ? "shape" : "data_offsets"] = random() % 2 ? json("x") : json();
      return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logs();
  folder = fuzz::scratch_dir() + "/model";
  fuzz::write_scratch_file("model/config.json", fuzz::kTinyLlamaConfig);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path =
      fuzz::write_scratch_file("model/model.safetensors", fuzz::as_text(data, size));
  fuzz::expect_clean_failure(
      [&] {
        loaders::SafetensorsFile file(path);
        for (const auto& [name, entry] : file.entries())
          if (entry.dtype) file.read(name);
      },
      {path});
  fuzz::expect_clean_failure([&] { load_model(folder, LoadOptions{}); }, {folder});
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  std::minstd_rand random(seed);
  if (size < 8 || random() % 8 == 0) return LLVMFuzzerMutate(data, size, max_size);
  const uint64_t header_length = read_u64(data);
  if (header_length > size - 8) return LLVMFuzzerMutate(data, size, max_size);
  // Deep nesting is refused by the reader anyway, and would overflow the stack of dump() here.
  if (std::count(data + 8, data + 8 + header_length, '[') +
          std::count(data + 8, data + 8 + header_length, '{') >
      256)
    return LLVMFuzzerMutate(data, size, max_size);
  json header = json::parse(data + 8, data + 8 + header_length, nullptr, false);
  if (!header.is_object() || header.empty()) return LLVMFuzzerMutate(data, size, max_size);
  std::string payload(reinterpret_cast<const char*>(data) + 8 + header_length,
                      size - 8 - header_length);
  std::vector<std::string> names;
  for (const auto& item : header.items()) names.push_back(item.key());
  std::string length_field;  // set when the header length itself is mutated
  switch (random() % 6) {
    case 0:
    case 1:
    case 2: {
      json& entry = header[names[random() % names.size()]];
      if (!entry.is_object()) entry = json::object();
      mutate_entry(entry, random, payload.size());
      break;
    }
    case 3: {  // an entry removed, copied under a new name, or metadata added
      const std::string& name = names[random() % names.size()];
      if (random() % 3 == 0) {
        header.erase(name);
      } else if (random() % 2 == 0) {
        header[name + "_copy"] = header[name];
      } else {
        header["__metadata__"] = random() % 2 ? json({{"format", "pt"}}) : json(name);
      }
      break;
    }
    case 4:  // the data cut short or grown
      payload.resize(random() % (payload.size() + 64));
      break;
    default:
      length_field = u64_bytes(fuzz::interesting_number(random, header_length));
      break;
  }
  const std::string text = header.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string out = length_field.empty() ? u64_bytes(text.size()) : length_field;
  out += text;
  out += payload;
  return fuzz::store_mutation(out, data, size, max_size);
}
