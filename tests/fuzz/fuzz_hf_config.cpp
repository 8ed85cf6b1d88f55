// Fuzz target: a Hugging Face config.json (and, after a NUL byte in the input, a
// generation_config.json beside it), read into a ModelConfig; when it reads, the list of weights
// the architecture expects is built from it, which sizes by its layer count and dimensions.
#include "fuzz/fuzz_support.h"
#include "models/architecture_registry.h"
#include "models/loaders/loaders.h"

using namespace tessera;

namespace {

std::string folder;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logs();
  folder = fuzz::scratch_dir() + "/config";
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = fuzz::as_text(data, size);
  const size_t split = input.find('\0');
  fuzz::write_scratch_file("config/config.json", input.substr(0, split));
  const std::string generation = folder + "/generation_config.json";
  if (split == std::string_view::npos) {
    std::remove(generation.c_str());
  } else {
    fuzz::write_scratch_file("config/generation_config.json", input.substr(split + 1));
  }
  fuzz::expect_clean_failure(
      [&] {
        const ModelConfig config = loaders::read_hf_config(folder);
        config.str();
        expected_weights(config);
      },
      {folder});
  return 0;
}
