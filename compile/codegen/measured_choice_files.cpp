#include "compile/codegen/measured_choice_files.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>

#include "compile/codegen/cache_entry.h"
#include "compile/ir/graph.h"
#include "kernels/measured_choices.h"

namespace tessera {
namespace fs = std::filesystem;

namespace {

constexpr std::string_view kDeviceLine = "device ";
// Bounds on what a file may hold: a model's decode shapes are a few hundred entries of under a
// hundred bytes; anything far past that is not ours.
constexpr size_t kMaxFileBytes = size_t{8} << 20;
constexpr size_t kMaxFieldBytes = 1024;

using Choices = std::map<std::string, std::string>;

// The choices of `device` in the file at `path`; nullopt when the file is missing, fails its
// check, or is not a store file of this device. Malformed lines are skipped (counted in `skipped`).
std::optional<Choices> read_choices(const std::string& path, const std::string& device,
                                    size_t* skipped) {
  std::error_code error;
  const auto bytes_on_disk = fs::file_size(path, error);
  if (error) return std::nullopt;
  if (bytes_on_disk > kMaxFileBytes) {
    spdlog::warn("measured choices: {} holds {} bytes, more than the {} a store file may; not used",
                 path, bytes_on_disk, kMaxFileBytes);
    return std::nullopt;
  }
  const std::optional<std::string> payload = read_cache_entry(path);
  if (!payload) return std::nullopt;
  std::string_view text = *payload;
  const size_t first_end = text.find('\n');
  if (first_end == std::string_view::npos ||
      text.substr(0, first_end) != std::string(kDeviceLine) + device)
    return std::nullopt;
  text.remove_prefix(first_end + 1);
  Choices choices;
  while (!text.empty()) {
    const size_t end = std::min(text.find('\n'), text.size());
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    const size_t tab = line.find('\t');
    if (tab == 0 || tab == std::string_view::npos || tab + 1 == line.size() ||
        line.find('\t', tab + 1) != std::string_view::npos || tab > kMaxFieldBytes ||
        line.size() - tab - 1 > kMaxFieldBytes) {
      ++*skipped;
      continue;
    }
    choices[std::string(line.substr(0, tab))] = std::string(line.substr(tab + 1));
  }
  return choices;
}

std::string file_text(const std::string& device, const Choices& choices) {
  std::string text = std::string(kDeviceLine) + device + "\n";
  for (const auto& [problem, choice] : choices) text += problem + "\t" + choice + "\n";
  return text;
}

// One line of text: keys and choices are written one per line, tab-separated.
bool storable(const std::string& text) {
  return !text.empty() && text.size() <= kMaxFieldBytes &&
         text.find_first_of("\t\n\r") == std::string::npos;
}

class MeasuredChoiceFiles final : public MeasuredChoiceStore {
 public:
  explicit MeasuredChoiceFiles(std::string cache_dir) : cache_dir_(std::move(cache_dir)) {}
  const std::string& cache_dir() const { return cache_dir_; }

  std::optional<std::string> find(const std::string& device, const std::string& problem) override {
    std::lock_guard lock(mutex_);
    const Choices& choices = loaded(device);
    auto found = choices.find(problem);
    if (found == choices.end()) return std::nullopt;
    return found->second;
  }

  void record(const std::string& device, const std::string& problem,
              const std::string& choice) override {
    if (!storable(device) || !storable(problem) || !storable(choice)) {
      spdlog::warn("measured choices: not storing '{}' = '{}' (not one line of at most {} bytes)",
                   problem, choice, kMaxFieldBytes);
      return;
    }
    std::lock_guard lock(mutex_);
    Choices& choices = loaded(device);
    choices[problem] = choice;
    if (unwritable_) return;
    const std::string path = measured_choice_file(cache_dir_, device);
    try {
      std::error_code error;
      fs::create_directories(fs::path(path).parent_path(), error);
      // What other processes recorded since this one read the file, under ours.
      size_t skipped = 0;
      if (std::optional<Choices> on_disk = read_choices(path, device, &skipped))
        for (auto& [other_problem, other_choice] : *on_disk)
          choices.try_emplace(other_problem, other_choice);
      write_cache_entry(path, file_text(device, choices));
    } catch (const std::exception& error) {
      unwritable_ = true;
      spdlog::warn("measured choices: {}; they are kept in memory for this process", error.what());
    }
  }

 private:
  // The device's choices, read from its file on first use.
  Choices& loaded(const std::string& device) {
    auto found = by_device_.find(device);
    if (found != by_device_.end()) return found->second;
    const std::string path = measured_choice_file(cache_dir_, device);
    size_t skipped = 0;
    std::optional<Choices> choices = read_choices(path, device, &skipped);
    if (skipped > 0)
      spdlog::warn("measured choices: skipped {} malformed lines of {}", skipped, path);
    if (choices)
      spdlog::info("measured choices: {} taken from {} (delete it to measure again)",
                   choices->size(), path);
    return by_device_.emplace(device, choices ? std::move(*choices) : Choices{}).first->second;
  }

  std::string cache_dir_;
  std::mutex mutex_;
  std::map<std::string, Choices> by_device_;
  bool unwritable_ = false;
};

struct Installed {
  std::mutex mutex;
  std::shared_ptr<MeasuredChoiceFiles> files;
};

Installed& installed() {
  static Installed* instance = new Installed();  // lives until exit, as the store it installs
  return *instance;
}

}  // namespace

std::string measured_choice_file(const std::string& cache_dir, const std::string& device) {
  return fmt::format("{}/measured/{:016x}.choices", cache_dir, fnv1a_hash(device));
}

void use_measured_choice_files(const std::string& cache_dir) {
  Installed& slot = installed();
  std::lock_guard lock(slot.mutex);
  if (!slot.files || slot.files->cache_dir() != cache_dir)
    slot.files = std::make_shared<MeasuredChoiceFiles>(cache_dir);
  set_measured_choice_store(slot.files);
}

}  // namespace tessera
