// Chat templates: the family is recognized from tokenizer_config.json's Jinja text, each family
// renders the layout its models were trained on, and bad messages are errors naming the message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine/server/chat_template.h"
#include "models/tokenizer/byte_tokenizer.h"
#include "runtime/check.h"

using namespace tessera;
using ::testing::HasSubstr;

namespace {

std::string rendered(ChatTemplate::Kind kind, const std::vector<ChatMessage>& messages) {
  auto tokenizer = make_byte_tokenizer();
  return tokenizer->decode(ChatTemplate(kind).render(*tokenizer, messages), false);
}

const std::vector<ChatMessage> kConversation = {
    {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}};

}  // namespace

TEST(ChatTemplate, FamiliesAreRecognizedFromTheJinjaText) {
  EXPECT_EQ(ChatTemplate::kind_of("{{ '<|start_header_id|>' + message['role'] }}"),
            ChatTemplate::Kind::llama3);
  EXPECT_EQ(ChatTemplate::kind_of("{{'<|im_start|>' + message['role'] + '\\n'}}"),
            ChatTemplate::Kind::chatml);
  EXPECT_EQ(ChatTemplate::kind_of("{{ '[INST] ' + message['content'] + ' [/INST]' }}"),
            ChatTemplate::Kind::mistral);
  EXPECT_EQ(ChatTemplate::kind_of("{{ messages }}"), ChatTemplate::Kind::plain);
  auto folder = std::filesystem::temp_directory_path() / "tessera-chat-template";
  std::filesystem::create_directories(folder);
  std::ofstream(folder / "tokenizer_config.json")
      << R"({"chat_template": "{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}"})";
  EXPECT_EQ(ChatTemplate::detect(folder.string()).kind(), ChatTemplate::Kind::chatml);
  EXPECT_EQ(ChatTemplate::detect((folder / "model.safetensors").string()).kind(),
            ChatTemplate::Kind::chatml);  // a file in the folder
  std::ofstream(folder / "tokenizer_config.json") << "{not json";
  EXPECT_EQ(ChatTemplate::detect(folder.string()).kind(), ChatTemplate::Kind::plain);
  std::filesystem::remove_all(folder);
  EXPECT_EQ(ChatTemplate::detect("synthetic:tiny").kind(), ChatTemplate::Kind::plain);
}

TEST(ChatTemplate, EachFamilyRendersItsLayout) {
  EXPECT_EQ(rendered(ChatTemplate::Kind::llama3, kConversation),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(rendered(ChatTemplate::Kind::chatml, kConversation),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(rendered(ChatTemplate::Kind::mistral, kConversation),
            "<s>[INST] Be brief.\n\nHi [/INST]Hello.</s>[INST] Bye [/INST]");
  EXPECT_THAT(rendered(ChatTemplate::Kind::plain, kConversation),
              HasSubstr("system: Be brief.\nuser: Hi\nassistant: Hello.\nuser: Bye\nassistant:"));
}

TEST(ChatTemplate, BadMessagesNameTheMessage) {
  auto tokenizer = make_byte_tokenizer();
  EXPECT_THROW(ChatTemplate().render(*tokenizer, {}), Error);
  try {
    ChatTemplate().render(*tokenizer, {{"user", "a"}, {"wizard", "b"}});
    FAIL() << "an unknown role must be an error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("messages[1].role"));
  }
}
