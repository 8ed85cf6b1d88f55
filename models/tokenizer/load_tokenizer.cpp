// load_tokenizer(): picks the tokenizer implementation from the file (or folder) it is given.
#include <unistd.h>

#include <filesystem>

#include "models/input_file.h"
#include "models/tokenizer.h"
#include "models/tokenizer/bpe/bpe_tokenizer.h"
#include "models/tokenizer/llama2c_tokenizer.h"
#include "models/tokenizer/vocab_tokenizers.h"
#include "runtime/check.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

constexpr const char* kExpected =
    "expected tokenizer.json, a folder holding tokenizer.json (or encoder.json + vocab.bpe, or "
    "vocab.json + merges.txt), a llama2.c tokenizer .bin, or a .gguf";

// The first bytes of a file, to tell formats apart when the name does not.
std::string file_start(const fs::path& path, size_t count) {
  const InputFile file = open_input_file(path.string(), "tokenizer");
  std::string start(count, '\0');
  const ssize_t read = ::read(file.descriptor, start.data(), count);
  ::close(file.descriptor);
  start.resize(read > 0 ? static_cast<size_t>(read) : 0);
  return start;
}

std::unique_ptr<Tokenizer> load_from_folder(const fs::path& folder) {
  if (fs::exists(folder / "tokenizer.json")) {
    return HfBpeTokenizer::from_tokenizer_json((folder / "tokenizer.json").string());
  }
  for (const auto& [vocab, merges] :
       {std::pair{"encoder.json", "vocab.bpe"}, std::pair{"vocab.json", "merges.txt"}}) {
    if (fs::exists(folder / vocab) && fs::exists(folder / merges)) {
      return HfBpeTokenizer::from_vocab_and_merges((folder / vocab).string(),
                                                   (folder / merges).string());
    }
  }
  if (fs::exists(folder / "tokenizer.bin")) {
    return load_llama2c_tokenizer((folder / "tokenizer.bin").string());
  }
  throw Error(fmt::format("{}: the folder has no tokenizer ({})", folder.string(), kExpected));
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  const fs::path file(path);
  std::error_code error;
  const fs::file_status status = fs::status(file, error);
  TESSERA_REQUIRE(fs::exists(status), "{}: no such file or folder ({})", path, kExpected);
  if (fs::is_directory(status)) return load_from_folder(file);
  // Anything but a folder or a regular file (a named pipe, a device) is refused by name here,
  // before a reader could block on it.
  ::close(open_input_file(path, "tokenizer").descriptor);

  const std::string name = file.filename().string();
  const std::string extension = file.extension().string();
  if (name == "encoder.json" || name == "vocab.json") {
    // The vocabulary half of a GPT-2 style pair: the merges sit next to it.
    for (const char* merges : {"vocab.bpe", "merges.txt"}) {
      const fs::path merges_path = file.parent_path() / merges;
      if (fs::exists(merges_path)) {
        return HfBpeTokenizer::from_vocab_and_merges(path, merges_path.string());
      }
    }
    throw Error(
        fmt::format("{}: a BPE vocabulary without its merges (vocab.bpe or merges.txt) "
                    "next to it",
                    path));
  }
  if (extension == ".gguf" || file_start(file, 4) == "GGUF") return load_gguf_tokenizer(path);
  if (extension == ".bin") return load_llama2c_tokenizer(path);
  if (extension == ".model") {
    throw Error(
        fmt::format("{}: sentencepiece .model files are not supported; use the model's "
                    "tokenizer.json instead",
                    path));
  }
  if (extension == ".json" || file_start(file, 1) == "{") {
    return HfBpeTokenizer::from_tokenizer_json(path);
  }
  throw Error(fmt::format("{}: unknown tokenizer format ({})", path, kExpected));
}

}  // namespace tessera
