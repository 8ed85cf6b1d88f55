// The safetensors format: an 8-byte little-endian header length, a JSON header mapping tensor
// names to {dtype, shape, data_offsets}, then the data section. The file is memory-mapped; every
// entry is checked against the file size when it is opened, so a truncated file fails up front
// with a message naming the file and the first tensor that runs past its end.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "models/loaders/mapped_file.h"
#include "models/loaders/stored_tensor.h"
#include "runtime/tensor.h"

namespace tessera::loaders {

struct SafetensorsEntry {
  std::string name;
  std::string dtype_name;      // as written in the header: "F32", "BF16", "F8_E4M3", ...
  std::optional<DType> dtype;  // set for F32, F16, BF16, I32, I64, F8_E4M3
  Shape shape;
  size_t begin = 0;  // byte offsets into the data section
  size_t end = 0;
};

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return file_->path(); }
  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  const SafetensorsEntry* find(const std::string& name) const;
  // The header's "__metadata__" string pairs ({"format": "pt"}).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The bytes of an entry; throws naming the file and the tensor when its dtype is unsupported.
  StoredTensor stored(const SafetensorsEntry& entry) const;
  // A host tensor holding a copy of the entry (in its stored dtype).
  Tensor read(const std::string& name) const;

 private:
  std::unique_ptr<MappedFile> file_;
  const std::byte* data_section_ = nullptr;
  size_t data_size_ = 0;
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Safetensors dtype names of the dtypes Tessera stores ("F32", "F16", "BF16", "I32", "I64",
// "F8_E4M3").
const char* safetensors_dtype_name(DType dtype);

// Writes tensors (any device, any layout) to a safetensors file in the given order.
void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

}  // namespace tessera::loaders
