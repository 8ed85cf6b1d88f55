// UTF-8 and Unicode helpers for the tokenizers: decoding and encoding code points, validity of a
// byte stream, NFC/NFD normalization, and GPT-2's byte <-> printable-character mapping.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessera::unicode {

// Length of the UTF-8 sequence a lead byte starts (1 for ASCII and for invalid lead bytes, so a
// scan always advances).
size_t utf8_sequence_length(unsigned char lead_byte);

// Decodes the code point at text[position] and advances position past it. Invalid or truncated
// sequences decode to U+FFFD and advance by one byte.
char32_t decode_utf8(std::string_view text, size_t& position);

void append_utf8(std::string& out, char32_t code_point);

// Length of the valid but unfinished UTF-8 sequence at the end of `bytes` (0 to 3): the bytes a
// stream must hold back because the next bytes may complete the character.
size_t incomplete_utf8_tail(std::string_view bytes);

// Replaces every invalid byte sequence by U+FFFD (one per maximal invalid subpart, as the WHATWG
// and Unicode "best practice" decoders do).
std::string sanitize_utf8(std::string_view bytes);

bool is_valid_utf8(std::string_view bytes);

// Characters in valid UTF-8 text (the bytes that start a sequence): Python's len() of the text.
size_t count_code_points(std::string_view valid_utf8);

// Unicode normalization forms C and D (canonical only). Bytes that are not valid UTF-8 are copied
// unchanged and act as starters.
std::string normalize_nfc(std::string_view text);
// True when every character passes NFC's quick check: the text is already NFC (most text is).
bool is_nfc_quick(std::string_view text);
std::string normalize_nfd(std::string_view text);

// GPT-2's reversible byte <-> character mapping used by byte-level BPE: printable bytes map to
// themselves, the others to U+0100 and up. byte_to_char_utf8()[b] is the UTF-8 of b's character.
const std::array<std::string, 256>& byte_to_char_utf8();
// The byte of a mapped character, or -1 when the character is not in the mapping.
int char_to_byte(char32_t code_point);

}  // namespace tessera::unicode
