// Numbers and files from outside, one test per class of failure the fuzz targets (tests/fuzz)
// guard against: sizes that overflow, counts that would allocate before being checked, nesting
// deep enough to exhaust the stack (in parsers and in error messages), strings that pass as
// dtypes, separators that never advance, vocabularies built in quadratic time, files that are not
// regular files, and errors that name no input. Each must be a clear tessera::Error naming the
// file, key or setting, quickly.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "engine/config.h"
#include "engine/runner/run_setup.h"
#include "models/architecture_registry.h"
#include "models/json_input.h"
#include "models/loaders/gguf.h"
#include "models/loaders/loaders.h"
#include "models/loaders/safetensors.h"
#include "models/model_weights.h"
#include "models/tokenizer.h"
#include "models/tokenizer/bpe/bpe_tokenizer.h"
#include "models/tokenizer/text/replace_all.h"
#include "models/tokenizer/vocab_tokenizers.h"
#include "runtime/check.h"
#include "runtime/checked_math.h"
#include "runtime/tensor.h"
#include "support/error_of.h"
#include "support/test_tensors.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using testing::error_of;
using ::testing::HasSubstr;

// An empty directory for one test.
std::string fresh_temp_dir(const std::string& name) {
  const std::string path = testing::fresh_temp_dir(name);
  fs::create_directories(path);
  return path;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string u64(uint64_t value) {
  return std::string(reinterpret_cast<const char*>(&value), 8);
}

std::string safetensors_with_header(const std::string& header, size_t data_bytes) {
  return u64(header.size()) + header + std::string(data_bytes, '\0');
}

// A GGUF file: header counts, then the given metadata and tensor-info bytes.
std::string gguf_file(uint64_t tensors, uint64_t metadata, const std::string& body) {
  std::string out = "GGUF";
  const uint32_t version = 3;
  out.append(reinterpret_cast<const char*>(&version), 4);
  return out + u64(tensors) + u64(metadata) + body;
}

std::string gguf_string(const std::string& text) {
  return u64(text.size()) + text;
}

template <typename T>
std::string raw(T value) {
  return std::string(reinterpret_cast<const char*>(&value), sizeof(T));
}

const char* const kLlamaConfig = R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 16,
  "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
  "num_key_value_heads": 1, "max_position_embeddings": 32})";

// ---- Sizes multiplied from untrusted numbers ----

TEST(UntrustedInputs, CheckedArithmeticNeverWraps) {
  EXPECT_EQ(checked_multiply<int64_t>(int64_t{1} << 31, int64_t{1} << 31), int64_t{1} << 62);
  EXPECT_FALSE(checked_multiply<int64_t>(int64_t{1} << 32, int64_t{1} << 31));
  EXPECT_FALSE(checked_add<uint64_t>(~uint64_t{0}, 1));
  const Shape overflowing{int64_t{1} << 32, int64_t{1} << 32};
  EXPECT_FALSE(checked_numel(overflowing));
  EXPECT_FALSE(checked_numel(Shape{4, -1}));
  EXPECT_FALSE(checked_numel(Shape{0, int64_t{1} << 40, int64_t{1} << 40}));
  EXPECT_EQ(checked_numel(Shape{0, int64_t{1} << 20, 3}), 0);
  EXPECT_EQ(checked_nbytes(Shape{3, 5}, 4), 60);
  EXPECT_FALSE(checked_nbytes(Shape{int64_t{1} << 62}, 4));
  EXPECT_THAT(error_of([] {
                Tensor::empty({int64_t{1} << 62, 4}, DType::f32);
              }),
              HasSubstr("overflows"));
}

TEST(UntrustedInputs, SafetensorsShapeWhoseByteSizeOverflows) {
  // 2^32 x 2^32 elements: the element count wraps to 0 in 64 bits, which once matched an empty
  // data range.
  const std::string dir = fresh_temp_dir("untrusted_safetensors_overflow");
  const std::string path = dir + "/model.safetensors";
  write_bytes(
      path,
      safetensors_with_header(
          R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0));
  EXPECT_THAT(error_of([&] { loaders::SafetensorsFile file(path); }),
              AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("needs more than")));
  write_bytes(
      path, safetensors_with_header(
                R"({"w":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,0]}})", 0));
  EXPECT_THAT(error_of([&] { loaders::SafetensorsFile file(path); }),
              AllOf(HasSubstr(path), HasSubstr("must hold integers")));
}

TEST(UntrustedInputs, GgufTensorWhoseByteSizeOverflows) {
  const std::string dir = fresh_temp_dir("untrusted_gguf_overflow");
  const std::string path = dir + "/model.gguf";
  std::string info = gguf_string("w") + raw<uint32_t>(4);
  for (int d = 0; d < 4; ++d) info += u64(uint64_t{1} << 36);  // 2^144 elements
  info += raw<uint32_t>(0) + u64(0);
  write_bytes(path, gguf_file(1, 0, info) + std::string(64, '\0'));
  EXPECT_THAT(error_of([&] { loaders::GgufFile file(path); }),
              AllOf(HasSubstr(path), HasSubstr("tensor 'w'"), HasSubstr("whose size overflows")));
  // A zero size makes the element count 0, but must not hide the others' overflowing product:
  // the strides still multiply them (a fuzz finding).
  std::string zero = gguf_string("w") + raw<uint32_t>(4) + u64(0);
  for (int d = 0; d < 3; ++d) zero += u64(uint64_t{1} << 36);
  zero += raw<uint32_t>(0) + u64(0);
  write_bytes(path, gguf_file(1, 0, zero) + std::string(64, '\0'));
  EXPECT_THAT(error_of([&] { loaders::GgufFile file(path); }),
              AllOf(HasSubstr(path), HasSubstr("tensor 'w'"), HasSubstr("whose size overflows")));
}

TEST(UntrustedInputs, EngineKeysAreBoundedAndTheirProductsChecked) {
  EXPECT_THAT(
      error_of([] { load_run_config("", {"engine.max_num_batched_tokens=4611686018427387904"}); }),
      AllOf(HasSubstr("engine.max_num_batched_tokens"), HasSubstr("must be in 1..")));
  EXPECT_THAT(
      error_of([] {
        load_run_config("", {"engine.num_kv_blocks=2000000000", "engine.block_size=64"});
      }),
      AllOf(HasSubstr("engine.num_kv_blocks"), HasSubstr("engine.block_size"), HasSubstr("slots")));
  EXPECT_THAT(
      error_of([] { load_run_config("", {"compilation.max_cudagraph_capture_size=99999999999"}); }),
      HasSubstr("compilation.max_cudagraph_capture_size"));
}

TEST(UntrustedInputs, RunMemoryIsCheckedAgainstTheDeviceNamingTheSetting) {
  ModelWeights weights = load_model("synthetic:tiny", {});
  auto model = create_model(std::move(weights), 64);
  EngineConfig config;
  config.cache.num_kv_blocks = int64_t{1} << 24;  // 2^28 slots of a 2-layer model: ~TiBs
  config.cache.block_size = 16;
  EXPECT_THAT(error_of([&] { make_runner_config(config, *model); }),
              AllOf(HasSubstr("KV cache"), HasSubstr("engine.num_kv_blocks")));
  RunnerConfig options;
  options.cache.num_kv_blocks = 4;
  options.scheduler.max_num_batched_tokens = int64_t{1} << 40;
  EXPECT_THAT(error_of([&] { check_run_memory(options, *model); }),
              HasSubstr("engine.max_num_batched_tokens"));
}

// ---- Counts that would size an allocation before anything checks them ----

TEST(UntrustedInputs, LayerCountIsRefusedBeforeAnythingPerLayerIsAllocated) {
  // Gemma 3 builds its per-layer attention types from num_hidden_layers while reading the config.
  const std::string dir = fresh_temp_dir("untrusted_layers");
  nlohmann::json config = nlohmann::json::parse(kLlamaConfig);
  config["architectures"] = {"Gemma3ForCausalLM"};
  config["num_hidden_layers"] = int64_t{1} << 40;
  write_bytes(dir + "/config.json", config.dump());
  EXPECT_THAT(error_of([&] { loaders::read_hf_config(dir); }),
              AllOf(HasSubstr("config.json"), HasSubstr("num_hidden_layers")));
  config["num_hidden_layers"] = 1;
  config["vocab_size"] = 18446744073709551615ull;  // past int64: once read as -1
  write_bytes(dir + "/config.json", config.dump());
  EXPECT_THAT(error_of([&] { loaders::read_hf_config(dir); }),
              AllOf(HasSubstr("config.json"), HasSubstr("vocab_size"), HasSubstr("integer")));
}

TEST(UntrustedInputs, GgufCountsAreCheckedBeforeReading) {
  const std::string dir = fresh_temp_dir("untrusted_gguf_counts");
  const std::string path = dir + "/model.gguf";
  // An array claiming more elements than the file has bytes.
  const std::string array = gguf_string("tokenizer.ggml.scores") + raw<uint32_t>(9) +
                            raw<uint32_t>(0) + u64(uint64_t{1} << 40);
  write_bytes(path, gguf_file(0, 1, array) + std::string(100, '\0'));
  EXPECT_THAT(error_of([&] { loaders::GgufFile file(path); }),
              AllOf(HasSubstr(path), HasSubstr("tokenizer.ggml.scores"), HasSubstr("elements")));
  // A metadata count within the file size but past the reader's limit.
  write_bytes(path, gguf_file(0, 100000, std::string(2'000'000, '\0')));
  EXPECT_THAT(error_of([&] { loaders::GgufFile file(path); }),
              AllOf(HasSubstr(path), HasSubstr("100000 metadata pairs")));
}

TEST(UntrustedInputs, SparseVocabularyIdsAreRefusedBeforeSizingTheTable) {
  const std::string dir = fresh_temp_dir("untrusted_sparse_vocab");
  const std::string path = dir + "/tokenizer.json";
  write_bytes(path,
              R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 16000000}, "merges": []}})");
  EXPECT_THAT(error_of([&] { HfBpeTokenizer::from_tokenizer_json(path); }),
              AllOf(HasSubstr(path), HasSubstr("dense")));
  write_bytes(path, R"({"added_tokens": [{"id": 1e300, "content": "x"}],
                        "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})");
  EXPECT_THAT(error_of([&] { HfBpeTokenizer::from_tokenizer_json(path); }),
              AllOf(HasSubstr(path), HasSubstr("added token")));
}

// ---- Nesting depth: parsers and error messages ----

TEST(UntrustedInputs, DeepJsonIsRefusedAndErrorMessagesStayBounded) {
  const std::string dir = fresh_temp_dir("untrusted_deep_json");
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  write_bytes(dir + "/config.json", R"({"architectures": )" + deep + "}");
  EXPECT_THAT(error_of([&] { loaders::read_hf_config(dir); }),
              AllOf(HasSubstr("config.json"), HasSubstr("nests deeper")));
  const std::string tokenizer = dir + "/tokenizer.json";
  write_bytes(tokenizer, R"({"normalizer": )" + deep + "}");
  EXPECT_THAT(error_of([&] { HfBpeTokenizer::from_tokenizer_json(tokenizer); }),
              AllOf(HasSubstr(tokenizer), HasSubstr("nesting deeper")));
  const std::string model = dir + "/model.safetensors";
  write_bytes(model, safetensors_with_header(R"({"w": )" + deep + "}", 0));
  EXPECT_THAT(error_of([&] { loaders::SafetensorsFile file(model); }),
              AllOf(HasSubstr(model), HasSubstr("nests deeper")));
  // A value as deep as the parser allows, quoted in an error: the excerpt is short.
  const std::string allowed = std::string(60, '[') + std::string(60, ']');
  write_bytes(dir + "/config.json", R"({"architectures": )" + allowed + "}");
  const std::string message = error_of([&] { loaders::read_hf_config(dir); });
  EXPECT_THAT(message, HasSubstr("'architectures' must be a non-empty list"));
  EXPECT_LT(message.size(), 600u);
  EXPECT_EQ(json_excerpt(nlohmann::json(std::string(1000, 'x')), 20).size(), 23u);
}

TEST(UntrustedInputs, DeepYamlIsAnErrorNamingTheFile) {
  const std::string dir = fresh_temp_dir("untrusted_deep_yaml");
  const std::string path = dir + "/run.yaml";
  write_bytes(path, "engine:\n  model: " + std::string(5000, '[') + std::string(5000, ']') + "\n");
  EXPECT_THAT(error_of([&] { load_run_config(path); }), HasSubstr(path));
  // A map under an unknown key is refused at that key, however deep it goes.
  std::string nested = "engine:\n";
  for (int depth = 1; depth < 200; ++depth) nested += std::string(2 * depth, ' ') + "k:\n";
  write_bytes(path, nested + std::string(400, ' ') + "v: 1\n");
  EXPECT_THAT(error_of([&] { load_run_config(path); }),
              AllOf(HasSubstr(path), HasSubstr("unknown key 'engine.k'")));
}

// ---- Strings that pass as dtypes ----

TEST(UntrustedInputs, SafetensorsDtypeMustBeADtype) {
  const std::string dir = fresh_temp_dir("untrusted_dtype");
  const std::string path = dir + "/model.safetensors";
  write_bytes(path, safetensors_with_header(
                        R"({"w":{"dtype":"F32 ","shape":[2],"data_offsets":[0,8]}})", 8));
  EXPECT_THAT(error_of([&] { loaders::SafetensorsFile file(path); }),
              AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("not a safetensors dtype")));
  // Sub-byte dtypes of the format are sized in bits: 3 F4 values take 2 bytes.
  write_bytes(
      path, safetensors_with_header(R"({"w":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", 2));
  EXPECT_NO_THROW(loaders::SafetensorsFile file(path));
}

// ---- Separators that never advance ----

TEST(UntrustedInputs, EmptySeparatorsAreRefusedOrReplaceNothing) {
  std::string text = "a b";
  replace_all(text, "", "x");
  EXPECT_EQ(text, "a b");
  const std::string dir = fresh_temp_dir("untrusted_separators");
  const std::string path = dir + "/tokenizer.json";
  const std::string model = R"("model": {"type": "BPE", "vocab": {"a": 0}, "merges": []})";
  write_bytes(path,
              R"({"pre_tokenizer": {"type": "Metaspace", "replacement": ""}, )" + model + "}");
  EXPECT_THAT(error_of([&] { HfBpeTokenizer::from_tokenizer_json(path); }),
              AllOf(HasSubstr(path), HasSubstr("non-empty replacement")));
  write_bytes(path, R"({"decoder": {"type": "Strip", "content": "", "start": 18446744073709551615,
                        "stop": 0}, )" +
                        model + "}");
  EXPECT_THAT(error_of([&] { HfBpeTokenizer::from_tokenizer_json(path); }),
              AllOf(HasSubstr(path), HasSubstr("Strip")));
}

// ---- Vocabulary builds linear in the pieces' bytes ----

TEST(UntrustedInputs, LongPiecesBuildInLinearTime) {
  // One piece of 2^20 bytes, and all of its prefixes up to 512: split by split lookups would
  // hash ~2^39 bytes (hours); the trie walks see each byte twice.
  SentencePieceVocab vocab;
  vocab.source = "test:long-pieces";
  vocab.pieces = {"<unk>", "<s>", "</s>"};
  for (size_t length = 1; length <= 512; ++length) vocab.pieces.push_back(std::string(length, 'a'));
  vocab.pieces.push_back(std::string(size_t{1} << 20, 'a'));
  vocab.scores.assign(vocab.pieces.size(), 0.0f);
  for (size_t i = 3; i < vocab.pieces.size(); ++i) vocab.scores[i] = static_cast<float>(i);
  vocab.unk_id = 0;
  vocab.bos_id = 1;
  vocab.eos_ids = {2};
  vocab.add_dummy_prefix = false;
  const auto tokenizer = make_sentencepiece_tokenizer(std::move(vocab));
  // The highest-scoring merge wins: the long piece, built from its two halves' merges.
  EXPECT_EQ(tokenizer->encode(std::string(8, 'a'), false), std::vector<int32_t>{3 + 7});
}

// ---- Errors found by fuzzing ----

TEST(UntrustedInputs, StreamKeepsTextContextPastRunsOfHiddenIds) {
  // Ids that show nothing (past the vocabulary, or skipped specials) once pushed the last text
  // out of the stream's window, and the next token lost its leading space.
  const auto tokenizer = load_tokenizer(std::string(TESSERA_SHARED_DIR) + "/models/stories260K-hf");
  const std::vector<int32_t> text = tokenizer->encode("Once upon a time", false);
  ASSERT_GE(text.size(), 2u);
  std::vector<int32_t> ids = {text[0]};
  for (int i = 0; i < 20; ++i) ids.push_back(1 << 30);
  ids.insert(ids.end(), text.begin() + 1, text.end());
  StreamingDecoder stream(*tokenizer);
  std::string streamed;
  for (int32_t id : ids) streamed += stream.push(id);
  streamed += stream.finish();
  EXPECT_EQ(streamed, tokenizer->decode(ids));
  EXPECT_EQ(streamed, "Once upon a time");
}

TEST(UntrustedInputs, GgufRopeFrequenciesOfAnIntegerTypeNameTheFile) {
  // rope_freqs.weight stored as I64 once failed in the cast with no file named.
  const std::string dir = fresh_temp_dir("untrusted_rope_freqs");
  const std::string path = dir + "/model.gguf";
  const std::string architecture =
      gguf_string("general.architecture") + raw<uint32_t>(8) + gguf_string("llama");
  std::string metadata = architecture;
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, uint32_t>>{{"llama.embedding_length", 8},
                                                     {"llama.block_count", 1},
                                                     {"llama.feed_forward_length", 16},
                                                     {"llama.attention.head_count", 2}})
    metadata += gguf_string(key) + raw<uint32_t>(4) + raw<uint32_t>(value);
  const std::string info = gguf_string("rope_freqs.weight") + raw<uint32_t>(1) + u64(2) +
                           raw<uint32_t>(27) + u64(0);  // I64
  std::string file = gguf_file(1, 5, metadata + info);
  file.append((32 - file.size() % 32) % 32, '\0');
  write_bytes(path, file + std::string(16, '\0'));
  EXPECT_THAT(error_of([&] { load_model(path, {}); }),
              AllOf(HasSubstr(path), HasSubstr("rope_freqs.weight"), HasSubstr("i64")));
}

// ---- Only regular files ----

TEST(UntrustedInputs, NamedPipesAndFoldersAreRefusedWithoutBlocking) {
  const std::string dir = fresh_temp_dir("untrusted_fifo");
  for (const char* name : {"model.bin", "model.gguf", "tokenizer.json", "run.yaml"}) {
    ASSERT_EQ(::mkfifo((dir + "/" + name).c_str(), 0600), 0) << name;
  }
  EXPECT_THAT(error_of([&] { load_model(dir + "/model.bin", {}); }),
              AllOf(HasSubstr("model.bin"), HasSubstr("named pipe")));
  EXPECT_THAT(error_of([&] { load_model(dir + "/model.gguf", {}); }),
              AllOf(HasSubstr("model.gguf"), HasSubstr("named pipe")));
  EXPECT_THAT(error_of([&] { load_tokenizer(dir + "/tokenizer.json"); }),
              AllOf(HasSubstr("tokenizer.json"), HasSubstr("named pipe")));
  EXPECT_THAT(error_of([&] { load_run_config(dir + "/run.yaml"); }),
              AllOf(HasSubstr("run.yaml"), HasSubstr("named pipe")));
  // A folder where a file is expected.
  const std::string folder = fresh_temp_dir("untrusted_folder_config");
  fs::create_directories(folder + "/config.json");
  EXPECT_THAT(error_of([&] { loaders::read_hf_config(folder); }),
              AllOf(HasSubstr("config.json"), HasSubstr("directory")));
  fs::create_directories(folder + "/tokenizer.json");
  EXPECT_THAT(error_of([&] { load_tokenizer(folder); }),
              AllOf(HasSubstr("tokenizer.json"), HasSubstr("directory")));
}

TEST(UntrustedInputs, IndexShardsMustBeFilesInTheFolder) {
  const std::string dir = fresh_temp_dir("untrusted_index");
  write_bytes(dir + "/config.json", kLlamaConfig);
  write_bytes(dir + "/model.safetensors.index.json",
              R"({"weight_map": {"model.embed_tokens.weight": "../../etc/passwd"}})");
  EXPECT_THAT(error_of([&] { load_model(dir, {}); }),
              AllOf(HasSubstr("model.safetensors.index.json"), HasSubstr("../../etc/passwd"),
                    HasSubstr("not the name of a file in the folder")));
}

}  // namespace
}  // namespace tessera
