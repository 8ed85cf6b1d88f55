#include "kernels/measured_choices.h"

#include <mutex>
#include <utility>

namespace tessera {
namespace {

struct InstalledStore {
  std::mutex mutex;
  std::shared_ptr<MeasuredChoiceStore> store;
};

InstalledStore& installed() {
  static InstalledStore* instance = new InstalledStore();  // lives until exit: modules unload late
  return *instance;
}

std::shared_ptr<MeasuredChoiceStore> current_store() {
  InstalledStore& slot = installed();
  std::lock_guard lock(slot.mutex);
  return slot.store;
}

}  // namespace

void set_measured_choice_store(std::shared_ptr<MeasuredChoiceStore> store) {
  InstalledStore& slot = installed();
  std::lock_guard lock(slot.mutex);
  slot.store = std::move(store);
}

std::optional<std::string> find_measured_choice(const std::string& device,
                                                const std::string& problem) {
  const std::shared_ptr<MeasuredChoiceStore> store = current_store();
  return store ? store->find(device, problem) : std::nullopt;
}

void record_measured_choice(const std::string& device, const std::string& problem,
                            const std::string& choice) {
  if (const std::shared_ptr<MeasuredChoiceStore> store = current_store())
    store->record(device, problem, choice);
}

}  // namespace tessera
