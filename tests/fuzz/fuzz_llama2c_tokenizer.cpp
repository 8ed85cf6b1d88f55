// Fuzz target: a llama2.c tokenizer .bin (max_token_length, then per token a float score, an
// int32 length and the bytes), read with and without a vocabulary size from the model, then used
// to encode and decode a short text.
#include "fuzz/fuzz_support.h"
#include "models/tokenizer.h"
#include "models/tokenizer/llama2c_tokenizer.h"

using namespace tessera;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch_file("tokenizer.bin", fuzz::as_text(data, size));
  for (const std::optional<int64_t> vocab_size :
       {std::optional<int64_t>(), std::optional<int64_t>(size % 600)}) {
    fuzz::expect_clean_failure(
        [&] {
          const auto tokenizer = load_llama2c_tokenizer(path, vocab_size);
          const std::vector<int32_t> ids =
              tokenizer->encode("Once upon a <s> time \xe2\x96\x81", true);
          for (int32_t id : ids)
            fuzz::require(id >= 0 && id < tokenizer->vocab_size(),
                          "encode gave an id outside the vocabulary");
          tokenizer->decode(ids, false);
          tokenizer->decode({-1, 0, 1, 2, 3, 258, 1 << 30}, true);
        },
        {path});
  }
  return 0;
}
