#include "engine/server/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/check.h"

namespace tessera {
namespace {

constexpr std::uintmax_t max_config_bytes = 16u << 20;

std::string read_small_regular_file(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return {};
  if (std::filesystem::file_size(path, error) > max_config_bytes || error) return {};
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

ChatTemplate::Kind ChatTemplate::kind_of(const std::string& jinja) {
  if (jinja.find("<|start_header_id|>") != std::string::npos) return Kind::llama3;
  if (jinja.find("<|im_start|>") != std::string::npos) return Kind::chatml;
  if (jinja.find("[INST]") != std::string::npos) return Kind::mistral;
  return Kind::plain;
}

ChatTemplate ChatTemplate::detect(const std::string& path) {
  if (path.empty() || path.starts_with("synthetic:")) return ChatTemplate();
  std::filesystem::path folder(path);
  std::error_code error;
  if (!std::filesystem::is_directory(folder, error)) folder = folder.parent_path();
  std::string text = read_small_regular_file(folder / "tokenizer_config.json");
  if (text.empty()) return ChatTemplate();
  nlohmann::json config = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object() || !config.contains("chat_template")) return ChatTemplate();
  const nlohmann::json& chat = config["chat_template"];
  std::string jinja;
  if (chat.is_string()) jinja = chat.get<std::string>();
  if (chat.is_array())  // [{"name": "default", "template": "..."}, ...]
    for (const nlohmann::json& entry : chat)
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string())
        jinja = entry["template"].get<std::string>();
  return ChatTemplate(kind_of(jinja));
}

const char* ChatTemplate::name() const {
  switch (kind_) {
    case Kind::llama3:
      return "llama3";
    case Kind::chatml:
      return "chatml";
    case Kind::mistral:
      return "mistral";
    case Kind::plain:
      return "plain";
  }
  return "plain";
}

std::vector<int32_t> ChatTemplate::render(const Tokenizer& tokenizer,
                                          const std::vector<ChatMessage>& messages) const {
  TESSERA_REQUIRE(!messages.empty(), "messages: at least one message is required");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    TESSERA_REQUIRE(role == "system" || role == "user" || role == "assistant",
                    "messages[{}].role: '{}' is not one of system, user, assistant", i, role);
  }
  std::string text;
  bool add_special = false;  // the templates that start with BOS write it themselves
  switch (kind_) {
    case Kind::llama3:
      text = "<|begin_of_text|>";
      for (const ChatMessage& m : messages)
        text += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + m.content + "<|eot_id|>";
      text += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    case Kind::chatml:
      for (const ChatMessage& m : messages)
        text += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      text += "<|im_start|>assistant\n";
      break;
    case Kind::mistral: {
      // The system message goes in front of the first user turn, as Mistral's template does.
      std::string system;
      bool first_user = true;
      text = "<s>";
      for (const ChatMessage& m : messages) {
        if (m.role == "system") {
          system += (system.empty() ? "" : "\n\n") + m.content;
        } else if (m.role == "user") {
          std::string content =
              first_user && !system.empty() ? system + "\n\n" + m.content : m.content;
          text += "[INST] " + content + " [/INST]";
          first_user = false;
        } else {
          text += m.content + "</s>";
        }
      }
      break;
    }
    case Kind::plain:
      for (const ChatMessage& m : messages) text += m.role + ": " + m.content + "\n";
      text += "assistant:";
      add_special = true;
      break;
  }
  return tokenizer.encode(text, add_special);
}

std::vector<int32_t> ChatTemplate::end_of_turn_ids(const Tokenizer& tokenizer) const {
  std::vector<int32_t> ids;
  const char* token = kind_ == Kind::llama3   ? "<|eot_id|>"
                      : kind_ == Kind::chatml ? "<|im_end|>"
                                              : nullptr;
  if (token)
    if (auto id = tokenizer.token_to_id(token)) ids.push_back(*id);
  return ids;
}

}  // namespace tessera
