// Summaries of timing samples, shared by the sweep and the serving benchmark (and written to match
// bench/compare_torch.py's): percentiles interpolate linearly between the two nearest ranks, as
// numpy.percentile does by default.
#pragma once

#include <span>

namespace tessera::bench {

// The p-th percentile (0 <= p <= 100) of `samples`, which must not be empty.
double percentile(std::span<const double> samples, double p);
double mean(std::span<const double> samples);

struct Distribution {
  double mean = 0, median = 0, p90 = 0, p99 = 0;
  static Distribution of(std::span<const double> samples);  // all 0 when empty
};

}  // namespace tessera::bench
