// The bytes that may come right after each rule of a grammar in some text of it (the grammar's
// FOLLOW sets, over bytes). The end of the text is no byte: a rule that may end the text adds
// nothing for it. Token masks use them to reject, ahead of time, a token that would leave a rule
// where nothing could take its next byte (position_tokens.h).
#pragma once

#include <vector>

#include "engine/structured_output/grammar.h"

namespace tessera {

// Per rule of `grammar`, in rule order. Linear in the grammar's size (worklists, no sweeps).
std::vector<ByteSet> bytes_after_rules(const Grammar& grammar);

}  // namespace tessera
