// Fuzz target: a Hugging Face tokenizer.json (vocabulary, merges, added tokens, normalizer,
// pre-tokenizer, decoder, post-processor), loaded, then used to encode a few texts and decode
// the ids, whole and streamed.
#include "fuzz/fuzz_support.h"
#include "models/tokenizer.h"
#include "models/tokenizer/bpe/bpe_tokenizer.h"

using namespace tessera;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path =
      fuzz::write_scratch_file("tokenizer/tokenizer.json", fuzz::as_text(data, size));
  fuzz::expect_clean_failure(
      [&] {
        const auto tokenizer = HfBpeTokenizer::from_tokenizer_json(path);
        for (const char* text : {"Hello world", " <s>  a\tb\n\n1234 </s>",
                                 "\xe4\xbd\xa0\xe5\xa5\xbd \xff\xfe", "<|endoftext|>x"}) {
          const std::vector<int32_t> ids = tokenizer->encode(text, true);
          tokenizer->decode(ids, true);
          StreamingDecoder stream(*tokenizer);
          for (int32_t id : ids) stream.push(id);
          stream.finish();
        }
        tokenizer->decode({-5, 0, 1, 2, 1 << 24}, false);
      },
      {path});
  return 0;
}
