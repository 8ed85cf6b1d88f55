// Fuzz target: a llama2.c checkpoint (.bin): a header of 7 int32 sizes, then float32 tensors
// whose sizes follow from it. Loaded as a model; the header's numbers must be checked against
// the file before anything is allocated from them.
#include "fuzz/fuzz_support.h"
#include "models/model_weights.h"

using namespace tessera;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch_file("model.bin", fuzz::as_text(data, size));
  fuzz::expect_clean_failure([&] { load_model(path, LoadOptions{}); }, {path});
  return 0;
}
