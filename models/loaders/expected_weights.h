// The tensors a llama-family model of a given config has, by Hugging Face name and shape, and the
// loop every loader runs over them: find each one in the checkpoint, check its shape, convert it.
// Extra tensors in a checkpoint (rotary inv_freq buffers, a duplicate lm_head of a tied model) are
// not loaded.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "models/loaders/stored_tensor.h"
#include "models/model_config.h"
#include "models/model_weights.h"

namespace tessera::loaders {

struct WeightSpec {
  std::string name;  // "model.layers.0.self_attn.q_proj.weight"
  Shape shape;
  bool rope_rows = false;  // a q/k projection (weight or bias): rows follow the RoPE convention
};

// Every tensor of `config` in load order: embeddings, then each layer, the final norm, lm_head
// (absent when tie_word_embeddings). Biases with attention_bias, q_norm/k_norm with qk_norm.
std::vector<WeightSpec> expected_weights(const ModelConfig& config);

// Where a loader found a tensor, for conversion and for messages.
struct FoundTensor {
  StoredTensor stored;
  std::string file;               // the file holding it
  std::string stored_name;        // its name in that file ("blk.0.attn_q.weight", ...)
  std::string stored_dtype_name;  // the file's dtype name when unsupported ("Q4_K"), else empty
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
