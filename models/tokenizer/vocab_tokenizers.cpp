#include "models/tokenizer/vocab_tokenizers.h"

#include <algorithm>

#include "models/tokenizer/bpe/bpe_tokenizer.h"
#include "runtime/check.h"

namespace tessera {
namespace {

std::unique_ptr<Tokenizer> make_gguf_llama_tokenizer(const GgufVocab& gguf) {
  SentencePieceVocab vocab;
  vocab.name = "gguf-llama";
  vocab.source = gguf.source;
  vocab.space_marker = "\u2581";
  vocab.pieces = gguf.tokens;
  vocab.scores = gguf.scores;
  TESSERA_REQUIRE(vocab.scores.size() == vocab.pieces.size(),
                  "{}: tokenizer.ggml.scores has {} entries for {} tokens", gguf.source,
                  vocab.scores.size(), vocab.pieces.size());
  if (!gguf.token_types.empty()) {
    TESSERA_REQUIRE(gguf.token_types.size() == gguf.tokens.size(),
                    "{}: tokenizer.ggml.token_type has {} entries for {} tokens", gguf.source,
                    gguf.token_types.size(), gguf.tokens.size());
    for (const int32_t type : gguf.token_types) {
      vocab.types.push_back(type >= 1 && type <= 6 ? static_cast<PieceType>(type)
                                                   : PieceType::kNormal);
    }
  }
  const auto size = static_cast<int32_t>(gguf.tokens.size());
  const auto in_range = [&](int32_t id) { return id >= 0 && id < size; };
  vocab.bos_id = gguf.bos_id.value_or(1);
  vocab.unk_id = gguf.unk_id.value_or(0);
  if (!in_range(*vocab.bos_id)) vocab.bos_id.reset();
  if (!in_range(*vocab.unk_id)) vocab.unk_id.reset();
  for (const auto id : {gguf.eos_id.value_or(2), gguf.eot_id.value_or(-1)}) {
    if (in_range(id) &&
        std::find(vocab.eos_ids.begin(), vocab.eos_ids.end(), id) == vocab.eos_ids.end()) {
      vocab.eos_ids.push_back(id);
    }
  }
  vocab.add_bos = gguf.add_bos.value_or(true);
  vocab.add_eos = gguf.add_eos.value_or(false);
  vocab.add_dummy_prefix = gguf.add_space_prefix.value_or(true);
  vocab.match_special_pieces = true;
  return std::make_unique<SentencePieceBpeTokenizer>(std::move(vocab));
}

std::unique_ptr<Tokenizer> make_gguf_gpt2_tokenizer(const GgufVocab& gguf) {
  ByteLevelBpeVocab vocab;
  vocab.source = gguf.source;
  vocab.name = "gguf-gpt2";
  vocab.tokens = gguf.tokens;
  vocab.merges = gguf.merges;
  vocab.token_types = gguf.token_types;
  vocab.pre_tokenizer_pattern = gguf_pre_tokenizer_pattern(gguf.pre, gguf.source);
  vocab.bos_id = gguf.bos_id;
  for (const auto id : {gguf.eos_id, gguf.eot_id}) {
    if (id && std::find(vocab.eos_ids.begin(), vocab.eos_ids.end(), *id) == vocab.eos_ids.end()) {
      vocab.eos_ids.push_back(*id);
    }
  }
  vocab.add_bos = gguf.add_bos.value_or(false) && gguf.bos_id.has_value();
  return make_byte_level_bpe_tokenizer(std::move(vocab));
}

}  // namespace

std::string gguf_pre_tokenizer_pattern(const std::string& pre, const std::string& source) {
  if (pre.empty() || pre == "default" || pre == "gpt2" || pre == "gpt-2" || pre == "mpt" ||
      pre == "olmo") {
    return hf::kGpt2Pattern;
  }
  if (pre == "llama-bpe" || pre == "llama3" || pre == "smaug-bpe") return hf::kLlama3Pattern;
  if (pre == "qwen2" || pre == "deepseek-r1-qwen") return hf::kQwen2Pattern;
  throw Error(
      fmt::format("{}: unsupported tokenizer.ggml.pre '{}' (supported: default, gpt2, "
                  "gpt-2, mpt, olmo, llama-bpe, llama3, smaug-bpe, qwen2, "
                  "deepseek-r1-qwen)",
                  source, pre));
}

std::unique_ptr<Tokenizer> make_gguf_tokenizer(const GgufVocab& vocab) {
  TESSERA_REQUIRE(!vocab.tokens.empty(), "{}: the file has no tokenizer.ggml.tokens", vocab.source);
  if (vocab.model == "llama") return make_gguf_llama_tokenizer(vocab);
  if (vocab.model == "gpt2") return make_gguf_gpt2_tokenizer(vocab);
  throw Error(fmt::format("{}: unsupported tokenizer.ggml.model '{}' (supported: llama, gpt2)",
                          vocab.source, vocab.model));
}

std::unique_ptr<Tokenizer> make_sentencepiece_tokenizer(SentencePieceVocab vocab) {
  return std::make_unique<SentencePieceBpeTokenizer>(std::move(vocab));
}

std::unique_ptr<Tokenizer> make_byte_level_bpe_tokenizer(ByteLevelBpeVocab vocab) {
  TESSERA_REQUIRE(vocab.token_types.empty() || vocab.token_types.size() == vocab.tokens.size(),
                  "{}: {} token types for {} tokens", vocab.source, vocab.token_types.size(),
                  vocab.tokens.size());
  HfBpeTokenizerParts parts;
  parts.name = vocab.name;
  parts.source = vocab.source;
  for (size_t i = 0; i < vocab.merges.size(); ++i) {
    const std::string& merge = vocab.merges[i];
    const size_t space = merge.find(' ');
    TESSERA_REQUIRE(space != std::string::npos, "{}: merge {} ('{}') has no space", vocab.source, i,
                    merge);
    parts.merges.emplace_back(merge.substr(0, space), merge.substr(space + 1));
  }
  for (size_t id = 0; id < vocab.token_types.size(); ++id) {
    const auto type = static_cast<PieceType>(vocab.token_types[id]);
    if (type != PieceType::kControl && type != PieceType::kUserDefined) continue;
    AddedToken token;
    token.content = vocab.tokens[id];
    token.id = static_cast<int32_t>(id);
    token.special = type == PieceType::kControl;
    parts.added_tokens.push_back(std::move(token));
  }
  parts.id_to_token = std::move(vocab.tokens);
  hf::PreTokenizer::Step split{hf::PreTokenizer::Kind::kSplit};
  split.pattern = std::make_shared<Regex>(vocab.pre_tokenizer_pattern, vocab.source);
  parts.pre_tokenizer.steps.push_back(std::move(split));
  parts.pre_tokenizer.steps.push_back({hf::PreTokenizer::Kind::kByteLevel});
  parts.decoder.steps.push_back({hf::Decoder::Kind::kByteLevel});
  parts.model_options.byte_level = true;
  parts.bos_id = vocab.bos_id;
  parts.eos_ids = vocab.eos_ids;
  if (vocab.add_bos && vocab.bos_id) parts.post_processor.prefix_ids.push_back(*vocab.bos_id);
  return std::make_unique<HfBpeTokenizer>(std::move(parts));
}

}  // namespace tessera
