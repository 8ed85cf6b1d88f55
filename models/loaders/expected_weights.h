// The loop every loader runs over the tensors a model expects (its architecture's list, models/
// architecture_registry.h): find each one in the checkpoint, check its shape, convert it. Extra
// tensors in a checkpoint (rotary inv_freq buffers, a duplicate lm_head of a tied model) are not
// loaded.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "models/loaders/stored_tensor.h"
#include "models/model.h"
#include "models/model_config.h"
#include "models/model_weights.h"

namespace tessera::loaders {

// Where a loader found a tensor, for conversion and for messages.
struct FoundTensor {
  StoredTensor stored;
  std::string file;               // the file holding it
  std::string stored_name;        // its name in that file ("blk.0.attn_q.weight", ...)
  std::string stored_dtype_name;  // the file's dtype name when unsupported ("IQ4_XS"), else empty
  std::string readable_dtype_names = "F32, F16, BF16";  // what the loader reads, for that error
};

// Throws the error for an expected tensor the checkpoint lacks; `stored_name` is the name it was
// looked up under in `where` (the HF name, or the GGUF name, ...).
[[noreturn]] void throw_missing_tensor(const ModelConfig& config, const std::string& where,
                                       const WeightSpec& spec, const std::string& stored_name);

// Finds every expected tensor through `find`, checks its shape, converts it to the run dtype and
// device. `missing_from` names where a missing tensor was looked for. With
// stored_rope_pairs, q/k rows are reordered from adjacent pairs to rotate_half.
std::map<std::string, Tensor> load_expected_weights(
    const ModelConfig& config, const std::string& missing_from,
    const std::function<std::optional<FoundTensor>(const WeightSpec&)>& find,
    const LoadOptions& options, bool stored_rope_pairs);

}  // namespace tessera::loaders
