#include "engine/bench/statistics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "runtime/check.h"

namespace tessera::bench {

double percentile(std::span<const double> samples, double p) {
  TESSERA_CHECK(!samples.empty(), "percentile of no samples");
  TESSERA_CHECK(p >= 0 && p <= 100, "percentile {} outside [0, 100]", p);
  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(rank));
  const size_t above = std::min(below + 1, sorted.size() - 1);
  const double weight = rank - static_cast<double>(below);
  return sorted[below] + (sorted[above] - sorted[below]) * weight;
}

double mean(std::span<const double> samples) {
  TESSERA_CHECK(!samples.empty(), "mean of no samples");
  return std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
}

Distribution Distribution::of(std::span<const double> samples) {
  if (samples.empty()) return {};
  return {bench::mean(samples), percentile(samples, 50), percentile(samples, 90),
          percentile(samples, 99)};
}

}  // namespace tessera::bench
