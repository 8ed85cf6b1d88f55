// load_gguf_tokenizer(): the tokenizer embedded in a .gguf file, read with the GGUF loader's
// metadata reader.
#include "models/loaders/gguf.h"
#include "models/tokenizer/vocab_tokenizers.h"

namespace tessera {

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::string& path) {
  const loaders::GgufFile file(path);
  const loaders::GgufTokenizerMetadata metadata = file.tokenizer_metadata();
  GgufVocab vocab;
  vocab.source = path;
  vocab.model = metadata.model;
  vocab.pre = metadata.pre;
  vocab.tokens = metadata.tokens;
  vocab.scores = metadata.scores;
  vocab.token_types = metadata.token_types;
  vocab.merges = metadata.merges;
  vocab.bos_id = metadata.bos_id;
  vocab.eos_id = metadata.eos_id;
  vocab.unk_id = metadata.unknown_id;
  vocab.add_bos = metadata.add_bos;
  vocab.add_eos = metadata.add_eos;
  // Keys the metadata struct does not carry.
  if (file.has("tokenizer.ggml.eot_token_id")) {
    const int64_t id = file.get_int("tokenizer.ggml.eot_token_id");
    if (id >= 0 && id < static_cast<int64_t>(vocab.tokens.size())) {
      vocab.eot_id = static_cast<int32_t>(id);
    }
  }
  if (file.has("tokenizer.ggml.add_space_prefix")) {
    vocab.add_space_prefix = file.get_bool("tokenizer.ggml.add_space_prefix");
  }
  return make_gguf_tokenizer(vocab);
}

}  // namespace tessera
