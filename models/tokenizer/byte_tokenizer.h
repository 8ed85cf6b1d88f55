// A tokenizer without a vocabulary file, for synthetic models: ids 0/1/2 are <unk>/<s>/</s> and
// id 3 + b is the byte b (the byte-token layout of llama2.c's tok512), so any text round-trips.
#pragma once

#include <memory>

#include "models/tokenizer.h"

namespace tessera {

std::unique_ptr<Tokenizer> make_byte_tokenizer();

}  // namespace tessera
