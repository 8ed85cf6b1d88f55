// TextStream with stories260K's tokenizer: the tokens it reports shown are exactly those whose
// text is in the output, each at the character where its text starts; a token that adds no text
// (a skipped <s>), or whose text lies in or past a stop string, is never shown.
#include <gtest/gtest.h>

#include "engine/text_stream.h"
#include "models/tokenizer/text/unicode.h"

using namespace tessera;

namespace {

const std::string kStories = std::string(TESSERA_SHARED_DIR) + "/models/stories260K";

struct Streamed {
  std::string text;
  std::vector<TextStream::ShownToken> shown;
  bool stopped = false;
};

Streamed stream_all(TextStream& stream, const std::vector<int32_t>& ids) {
  Streamed out;
  auto take = [&](TextStream::Piece piece) {
    out.text += piece.text;
    out.shown.insert(out.shown.end(), piece.shown.begin(), piece.shown.end());
    out.stopped = piece.stopped;
  };
  for (int32_t id : ids) {
    take(stream.push(id));
    if (out.stopped) return out;
  }
  take(stream.finish());
  return out;
}

// The text from character `offset` on.
std::string from_character(const std::string& text, int64_t offset) {
  size_t position = 0;
  for (int64_t skipped = 0; skipped < offset && position < text.size(); ++skipped)
    position += unicode::utf8_sequence_length(static_cast<unsigned char>(text[position]));
  return text.substr(position);
}

class TextStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tokenizer_ = load_tokenizer(kStories + "/tok512.bin");
    prompt_ = tokenizer_->encode("Story:", true);
  }
  std::vector<int32_t> ids(const std::string& text) const {
    return tokenizer_->encode(text, false);
  }
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<int32_t> prompt_;  // the generated text continues it: " Once" keeps its space
};

TEST_F(TextStreamTest, EveryTokenIsShownWhereItsTextStarts) {
  const std::vector<int32_t> story = ids("Once upon a time, there was a little dog.");
  TextStream stream(*tokenizer_, prompt_, {});
  const Streamed out = stream_all(stream, story);
  ASSERT_EQ(out.shown.size(), story.size());
  std::string joined;
  for (size_t i = 0; i < story.size(); ++i) {
    EXPECT_EQ(out.shown[i].push_number, static_cast<int64_t>(i));
    const std::string piece = tokenizer_->token_to_piece(story[i]);
    EXPECT_EQ(out.shown[i].text, piece);
    EXPECT_EQ(from_character(out.text, out.shown[i].text_offset).substr(0, piece.size()), piece)
        << "token " << i;
    joined += piece;
  }
  EXPECT_EQ(joined, out.text);
}

// Issue 36, item 10: stories260K writes "\n<s>\n"; the <s> adds no text and is not listed, nor
// is the lone "▁" after it (sentencepiece drops the space that follows <s>).
TEST_F(TextStreamTest, ATokenThatAddsNoTextIsNeverShown) {
  std::vector<int32_t> pushed = ids("The end.\n");
  const auto bos_push = static_cast<int64_t>(pushed.size());
  pushed.push_back(*tokenizer_->bos_id());
  for (int32_t id : ids("\nOne day")) pushed.push_back(id);
  ASSERT_EQ(tokenizer_->token_to_piece(pushed[static_cast<size_t>(bos_push) + 1]), " ");
  TextStream stream(*tokenizer_, prompt_, {});
  const Streamed out = stream_all(stream, pushed);
  EXPECT_EQ(out.text, " The end.\n\nOne day");
  ASSERT_EQ(out.shown.size(), pushed.size() - 2);
  std::string joined;
  for (const TextStream::ShownToken& shown : out.shown) {
    EXPECT_NE(shown.push_number, bos_push);
    EXPECT_NE(shown.push_number, bos_push + 1);
    const std::string piece =
        tokenizer_->token_to_piece(pushed[static_cast<size_t>(shown.push_number)]);
    EXPECT_EQ(from_character(out.text, shown.text_offset).substr(0, piece.size()), piece);
    joined += piece;
  }
  EXPECT_EQ(joined, out.text);
}

// "中" is three byte tokens: all three start at its character; what follows counts characters.
TEST_F(TextStreamTest, OffsetsCountCharactersAndASplitCharacterIsEachOfItsTokens) {
  const std::vector<int32_t> pushed = ids("a 中 b");
  TextStream stream(*tokenizer_, prompt_, {});
  const Streamed out = stream_all(stream, pushed);
  ASSERT_EQ(out.shown.size(), pushed.size());
  const int64_t character_at =
      static_cast<int64_t>(unicode::count_code_points(out.text.substr(0, out.text.find("中"))));
  int64_t at_character = 0;
  for (const TextStream::ShownToken& shown : out.shown)
    at_character += shown.text_offset == character_at;
  EXPECT_EQ(at_character, 3) << "the byte tokens of the character";
  EXPECT_EQ(from_character(out.text, out.shown.back().text_offset), " b");
  EXPECT_EQ(out.shown.back().text_offset,
            static_cast<int64_t>(unicode::count_code_points(out.text)) - 2);
}

// Tokens held back as a possible stop string are shown once it cannot be one, and never when it
// is: only tokens whose text starts before the stop string are listed.
TEST_F(TextStreamTest, TokensInOrPastAStopStringAreNeverShown) {
  const std::vector<int32_t> pushed = ids("Once upon a time, there was a dog.");
  TextStream stream(*tokenizer_, prompt_, {" there"});
  const Streamed out = stream_all(stream, pushed);
  ASSERT_TRUE(out.stopped);
  EXPECT_EQ(out.text, " Once upon a time,");
  ASSERT_FALSE(out.shown.empty());
  const int64_t length = static_cast<int64_t>(unicode::count_code_points(out.text));
  std::string joined;
  for (const TextStream::ShownToken& shown : out.shown) {
    EXPECT_LT(shown.text_offset, length);
    joined += tokenizer_->token_to_piece(pushed[static_cast<size_t>(shown.push_number)]);
  }
  EXPECT_EQ(joined, out.text);

  // " was a" may begin " was a cat": its tokens are held with their text until " dog" shows
  // it is not, then shown together.
  TextStream held(*tokenizer_, prompt_, {" was a cat"});
  size_t shown = 0, held_pushes = 0;
  for (int32_t id : pushed) {
    const TextStream::Piece piece = held.push(id);
    EXPECT_EQ(piece.text.empty(), piece.shown.empty())
        << "a token's text and it are shown together";
    held_pushes += piece.text.empty();
    shown += piece.shown.size();
  }
  shown += held.finish().shown.size();
  EXPECT_GE(held_pushes, 2u);
  EXPECT_EQ(shown, pushed.size());
}

}  // namespace
