#include "engine/bench/progress_bar.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace tessera::bench {

ProgressBar::ProgressBar() : terminal_(isatty(fileno(stderr)) != 0) {}

void ProgressBar::update(size_t done, size_t total, const std::string& what) {
  if (!terminal_) return;
  constexpr size_t kWidth = 30;
  const size_t filled = kWidth * std::min(done, total) / std::max<size_t>(total, 1);
  // \33[K clears what a longer previous line left.
  fmt::print(stderr, "\r[{}{}] {}/{} {}\33[K", std::string(filled, '#'),
             std::string(kWidth - filled, ' '), done, total, what);
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (!drawn_) return;
  fmt::print(stderr, "\n");
  drawn_ = false;
}

}  // namespace tessera::bench
