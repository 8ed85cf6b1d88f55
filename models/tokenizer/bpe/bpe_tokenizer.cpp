#include "models/tokenizer/bpe/bpe_tokenizer.h"

#include <algorithm>
#include <filesystem>

#include "models/input_file.h"
#include "models/json_input.h"
#include "models/tokenizer/tokenizer_json.h"
#include "runtime/check.h"

namespace tessera {

using json = nlohmann::json;

namespace {

// How far past the vocabulary's entry count its ids may reach (gaps for added tokens).
constexpr int64_t kIdSlack = 1024;

}  // namespace

HfBpeTokenizer::HfBpeTokenizer(HfBpeTokenizerParts parts)
    : name_(std::move(parts.name)),
      model_(std::move(parts.id_to_token), parts.merges, parts.model_options, parts.source),
      added_tokens_(std::move(parts.added_tokens)),
      normalizer_(std::move(parts.normalizer)),
      pre_tokenizer_(std::move(parts.pre_tokenizer)),
      decoder_(std::move(parts.decoder)),
      post_processor_(std::move(parts.post_processor)),
      bos_id_(parts.bos_id),
      eos_ids_(std::move(parts.eos_ids)) {
  vocab_size_ = static_cast<int64_t>(model_.size());
  std::vector<std::string> raw_patterns, normalized_patterns;
  for (size_t i = 0; i < added_tokens_.size(); ++i) {
    const AddedToken& token = added_tokens_[i];
    TESSERA_REQUIRE(token.id >= 0, "{}: added token '{}' has a negative id {}", parts.source,
                    token.content, token.id);
    added_token_index_[token.id] = i;
    vocab_size_ = std::max<int64_t>(vocab_size_, int64_t{token.id} + 1);
    // Normalized tokens are matched in their normalized form, after the text is normalized.
    raw_patterns.push_back(token.normalized ? std::string() : token.content);
    normalized_patterns.push_back(token.normalized ? normalizer_.apply(token.content)
                                                   : std::string());
  }
  raw_matcher_ = AddedTokenMatcher(added_tokens_, raw_patterns);
  normalized_matcher_ = AddedTokenMatcher(added_tokens_, normalized_patterns);
}

void HfBpeTokenizer::encode_segment(std::string_view segment, bool at_text_start,
                                    std::vector<int32_t>& out) const {
  const auto encode_text = [&](std::string_view text, bool starts_text) {
    pre_tokenizer_.apply(text, starts_text,
                         [&](std::string_view piece) { model_.encode(piece, out); });
  };
  if (normalizer_.empty() && normalized_matcher_.empty()) {
    encode_text(segment, at_text_start);
    return;
  }
  const std::string normalized = normalizer_.apply(std::string(segment));
  if (normalized_matcher_.empty()) {
    encode_text(normalized, at_text_start);
    return;
  }
  for (const auto& part : normalized_matcher_.split(normalized)) {
    if (part.token_id >= 0) {
      out.push_back(part.token_id);
    } else {
      encode_text(std::string_view(normalized).substr(part.begin, part.end - part.begin),
                  at_text_start && part.begin == 0);
    }
  }
}

std::vector<int32_t> HfBpeTokenizer::encode(const std::string& text, bool add_special) const {
  std::vector<int32_t> ids;
  if (add_special) ids = post_processor_.prefix_ids;
  for (const auto& segment : raw_matcher_.split(text)) {
    if (segment.token_id >= 0) {
      ids.push_back(segment.token_id);
    } else {
      encode_segment(std::string_view(text).substr(segment.begin, segment.end - segment.begin),
                     segment.begin == 0, ids);
    }
  }
  if (add_special) {
    ids.insert(ids.end(), post_processor_.suffix_ids.begin(), post_processor_.suffix_ids.end());
  }
  return ids;
}

std::vector<hf::Decoder::Token> HfBpeTokenizer::tokens_of(const std::vector<int32_t>& ids,
                                                          bool skip_special) const {
  std::vector<hf::Decoder::Token> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    if (const auto it = added_token_index_.find(id); it != added_token_index_.end()) {
      const AddedToken& token = added_tokens_[it->second];
      if (!(skip_special && token.special)) tokens.push_back({token.content, true});
    } else if (const std::string* token = model_.token(id)) {
      tokens.push_back({*token, false});
    }
    // Ids outside the vocabulary (a model's padded embedding rows) decode to nothing, as in HF.
  }
  return tokens;
}

std::string HfBpeTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  return decoder_.apply(tokens_of(ids, skip_special));
}

std::string HfBpeTokenizer::token_to_piece(int32_t id) const {
  return decoder_.apply(tokens_of({id}, /*skip_special=*/false), /*sequence_start=*/false);
}

std::optional<int32_t> HfBpeTokenizer::token_to_id(const std::string& token) const {
  for (const AddedToken& added : added_tokens_) {
    if (added.content == token) return added.id;
  }
  return model_.find(token);
}

namespace {

// tokenizer_config.json names tokens either as a string or as {"content": ...}.
std::optional<std::string> token_name(const json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return std::nullopt;
}

AddedToken parse_added_token(const json& value, const std::string& source) {
  try {
    AddedToken token;
    token.id = static_cast<int32_t>(
        json_integer(value.at("id"), 0, int64_t{1} << 24, source + ": an added token's id"));
    token.content = value.at("content").get<std::string>();
    token.special = value.value("special", false);
    token.normalized = value.value("normalized", !token.special);
    token.lstrip = value.value("lstrip", false);
    token.rstrip = value.value("rstrip", false);
    token.single_word = value.value("single_word", false);
    return token;
  } catch (const json::exception& e) {
    throw Error(
        fmt::format("{}: malformed added token {}: {}", source, json_excerpt(value), e.what()));
  }
}

std::optional<int32_t> int_or_first(const json& value) {
  if (value.is_number_integer()) return value.get<int32_t>();
  if (value.is_array() && !value.empty() && value[0].is_number_integer()) {
    return value[0].get<int32_t>();
  }
  return std::nullopt;
}

}  // namespace

std::unique_ptr<HfBpeTokenizer> HfBpeTokenizer::from_tokenizer_json(const std::string& path) {
  hf::TokenizerJson file = hf::read_tokenizer_json(path);
  const json& document = file.document;
  HfBpeTokenizerParts parts;
  parts.source = path;
  try {
    const json& model = document.at("model");
    const std::string type = model.value("type", std::string("BPE"));
    TESSERA_REQUIRE(type == "BPE",
                    "{}: unsupported tokenizer model type '{}' (only BPE tokenizers are supported: "
                    "GPT-2/Llama-3/Qwen byte-level BPE and Llama-2-style BPE with byte fallback)",
                    path, type);
    TESSERA_REQUIRE(file.has_vocab, "{}: model.vocab is missing or not an object", path);
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      const std::string affix = model.contains(key) && model[key].is_string()
                                    ? model[key].get<std::string>()
                                    : std::string();
      TESSERA_REQUIRE(affix.empty(), "{}: model.{} = '{}' is not supported", path, key, affix);
    }
    int64_t max_id = -1;
    for (const auto& [token, id] : file.vocab) {
      TESSERA_REQUIRE(id >= 0 && id < (int64_t{1} << 24), "{}: vocab entry '{}' has id {}", path,
                      token, id);
      max_id = std::max(max_id, id);
    }
    // Real vocabularies are dense, with gaps only where added tokens sit: a sparse id is
    // corruption, refused before a table that long is allocated.
    const size_t added_count =
        document.contains("added_tokens") && document["added_tokens"].is_array()
            ? document["added_tokens"].size()
            : 0;
    TESSERA_REQUIRE(max_id < static_cast<int64_t>(file.vocab.size() + added_count) + kIdSlack,
                    "{}: model.vocab has {} entries but ids up to {}; ids must be dense", path,
                    file.vocab.size(), max_id);
    parts.id_to_token.resize(static_cast<size_t>(max_id + 1));
    for (auto& [token, id] : file.vocab) parts.id_to_token[id] = std::move(token);
    parts.merges = std::move(file.merges);

    parts.normalizer = hf::parse_normalizer(document.value("normalizer", json()), path);
    parts.pre_tokenizer = hf::parse_pre_tokenizer(document.value("pre_tokenizer", json()), path);
    parts.decoder = hf::parse_decoder(document.value("decoder", json()), path);
    parts.model_options.byte_level = parts.pre_tokenizer.byte_level();
    parts.model_options.byte_fallback = model.value("byte_fallback", false);
    parts.model_options.ignore_merges = model.value("ignore_merges", false);
    parts.model_options.fuse_unk = model.value("fuse_unk", false);
    parts.name = parts.model_options.byte_level ? "hf-bpe-bytelevel" : "hf-bpe-sentencepiece";

    std::map<std::string, int32_t> token_ids;  // for post-processor templates
    if (document.contains("added_tokens")) {
      for (const json& value : document["added_tokens"]) {
        parts.added_tokens.push_back(parse_added_token(value, path));
        token_ids[parts.added_tokens.back().content] = parts.added_tokens.back().id;
      }
    }
    if (model.contains("unk_token") && model["unk_token"].is_string()) {
      const std::string unk = model["unk_token"].get<std::string>();
      for (size_t id = 0; id < parts.id_to_token.size(); ++id) {
        if (parts.id_to_token[id] == unk) parts.model_options.unk_id = static_cast<int32_t>(id);
      }
      if (!parts.model_options.unk_id && token_ids.count(unk)) {
        parts.model_options.unk_id = token_ids[unk];
      }
    }
    parts.post_processor =
        hf::parse_post_processor(document.value("post_processor", json()), path, token_ids);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: malformed tokenizer.json: {}", path, e.what()));
  }
  auto tokenizer = std::make_unique<HfBpeTokenizer>(std::move(parts));

  // tokenizer_config.json and generation_config.json next to the file give bos/eos; an explicit
  // add_bos_token/add_eos_token rewrites the template ends, as transformers' Llama tokenizer does.
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  json config = json::object();
  if (const auto config_path = folder / "tokenizer_config.json";
      std::filesystem::exists(config_path)) {
    config = read_json_file(config_path.string(), "tokenizer config");
  }
  const auto resolve = [&](const std::optional<std::string>& name) -> std::optional<int32_t> {
    if (!name) return std::nullopt;
    return tokenizer->token_to_id(*name);
  };
  const auto& prefix = tokenizer->post_processor_.prefix_ids;
  tokenizer->bos_id_ = resolve(token_name(config, "bos_token"));
  if (!tokenizer->bos_id_ && !config.contains("bos_token") && !prefix.empty()) {
    tokenizer->bos_id_ = prefix.front();
  }
  if (const auto eos = resolve(token_name(config, "eos_token"))) {
    tokenizer->eos_ids_.push_back(*eos);
  }
  const auto set_end = [](std::vector<int32_t>& ids, std::optional<int32_t> token, bool add,
                          bool at_front) {
    if (!token) return;
    const bool present = !ids.empty() && (at_front ? ids.front() : ids.back()) == *token;
    if (add && !present) ids.insert(at_front ? ids.begin() : ids.end(), *token);
    if (!add && present) ids.erase(at_front ? ids.begin() : ids.end() - 1);
  };
  if (config.contains("add_bos_token") && config["add_bos_token"].is_boolean()) {
    set_end(tokenizer->post_processor_.prefix_ids, tokenizer->bos_id_,
            config["add_bos_token"].get<bool>(), /*at_front=*/true);
  }
  if (config.contains("add_eos_token") && config["add_eos_token"].is_boolean()) {
    set_end(tokenizer->post_processor_.suffix_ids,
            tokenizer->eos_ids_.empty() ? std::nullopt
                                        : std::optional<int32_t>(tokenizer->eos_ids_.front()),
            config["add_eos_token"].get<bool>(), /*at_front=*/false);
  }
  if (const auto generation_path = folder / "generation_config.json";
      std::filesystem::exists(generation_path)) {
    const json generation = read_json_file(generation_path.string(), "generation config");
    if (generation.contains("eos_token_id")) {
      const json& eos = generation["eos_token_id"];
      for (const json& id : eos.is_array() ? eos : json::array({eos})) {
        if (!id.is_number_integer()) continue;
        const int32_t value = id.get<int32_t>();
        if (std::find(tokenizer->eos_ids_.begin(), tokenizer->eos_ids_.end(), value) ==
            tokenizer->eos_ids_.end()) {
          tokenizer->eos_ids_.push_back(value);
        }
      }
    }
    if (!tokenizer->bos_id_ && generation.contains("bos_token_id")) {
      tokenizer->bos_id_ = int_or_first(generation["bos_token_id"]);
    }
  }
  if (tokenizer->eos_ids_.empty()) {
    // No config: the usual end-of-text tokens, when the vocabulary has them as special tokens.
    for (const char* name :
         {"</s>", "<|endoftext|>", "<|end_of_text|>", "<|im_end|>", "<|eot_id|>"}) {
      for (const AddedToken& token : tokenizer->added_tokens_) {
        if (token.special && token.content == name) tokenizer->eos_ids_.push_back(token.id);
      }
    }
  }
  return tokenizer;
}

std::unique_ptr<HfBpeTokenizer> HfBpeTokenizer::from_vocab_and_merges(
    const std::string& vocab_path, const std::string& merges_path) {
  HfBpeTokenizerParts parts;
  parts.name = "hf-bpe-bytelevel";
  parts.source = vocab_path;
  const json vocab = read_json_file(vocab_path, "tokenizer vocabulary");
  TESSERA_REQUIRE(vocab.is_object(), "{}: expected a JSON object of token -> id", vocab_path);
  // Dense ids, as in tokenizer.json's model.vocab.
  const int64_t max_id = static_cast<int64_t>(vocab.size()) + kIdSlack;
  for (const auto& [token, id] : vocab.items()) {
    const auto index = static_cast<size_t>(
        json_integer(id, 0, max_id, fmt::format("{}: the id of token '{}'", vocab_path, token)));
    if (parts.id_to_token.size() <= index) parts.id_to_token.resize(index + 1);
    parts.id_to_token[index] = token;
  }
  const std::string merges_text = read_input_file(merges_path, "tokenizer merges");
  size_t line_number = 0;
  for (size_t position = 0; position < merges_text.size();) {
    size_t end = merges_text.find('\n', position);
    if (end == std::string::npos) end = merges_text.size();
    std::string_view line(merges_text.data() + position, end - position);
    position = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line.starts_with("#version")) continue;
    const size_t space = line.find(' ');
    TESSERA_REQUIRE(space != std::string_view::npos && line.find(' ', space + 1) == line.npos,
                    "{}:{}: expected two tokens separated by one space, got '{}'", merges_path,
                    line_number, line);
    parts.merges.emplace_back(std::string(line.substr(0, space)),
                              std::string(line.substr(space + 1)));
  }
  parts.source = merges_path;
  // GPT-2: ByteLevel(add_prefix_space = false) with its regex; ByteLevel decoder.
  hf::PreTokenizer::Step byte_level{hf::PreTokenizer::Kind::kByteLevel};
  byte_level.pattern = std::make_shared<Regex>(hf::kGpt2Pattern, vocab_path);
  parts.pre_tokenizer.steps.push_back(std::move(byte_level));
  parts.decoder.steps.push_back({hf::Decoder::Kind::kByteLevel});
  parts.model_options.byte_level = true;
  for (size_t id = 0; id < parts.id_to_token.size(); ++id) {
    if (parts.id_to_token[id] == "<|endoftext|>") {
      AddedToken end_of_text;
      end_of_text.content = "<|endoftext|>";
      end_of_text.id = static_cast<int32_t>(id);
      end_of_text.special = true;
      parts.added_tokens.push_back(end_of_text);
      parts.bos_id = end_of_text.id;
      parts.eos_ids.push_back(end_of_text.id);
    }
  }
  return std::make_unique<HfBpeTokenizer>(std::move(parts));
}

}  // namespace tessera
