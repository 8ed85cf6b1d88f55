#include "kernels/cuda/backend/profiled_replay.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>

#include "runtime/check.h"

namespace tessera::gpu {
namespace {

thread_local bool replays_counted = true;

}  // namespace

int64_t profiled_replay_number() {
  static const int64_t wanted = [] {
    const char* text = std::getenv("TESSERA_PROFILE_REPLAY");
    if (text == nullptr || *text == '\0') return int64_t{0};
    char* end = nullptr;
    errno = 0;
    const long long value = std::strtoll(text, &end, 10);
    TESSERA_REQUIRE(errno == 0 && *end == '\0' && value >= 1,
                    "TESSERA_PROFILE_REPLAY='{}' must be a positive replay number (1 is the first "
                    "graph replay of the process); unset it to profile nothing",
                    text);
    return static_cast<int64_t>(value);
  }();
  return wanted;
}

bool profiled_replay() {
  const int64_t wanted = profiled_replay_number();
  if (wanted == 0 || !replays_counted) return false;
  static std::atomic<int64_t> replays{0};
  return replays.fetch_add(1) + 1 == wanted;
}

UncountedReplays::UncountedReplays() : previous_(replays_counted) {
  replays_counted = false;
}

UncountedReplays::~UncountedReplays() {
  replays_counted = previous_;
}

}  // namespace tessera::gpu
