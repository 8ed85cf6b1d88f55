// What the CPU labs (quantized_cpu_lab, moe_cpu_lab) share: their command line and main,
// wall-clock medians of repeated calls and the read bandwidth their GB/s figures are set against,
// measured on the thread pool the kernels use (TESSERA_NUM_THREADS).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <string_view>
#include <vector>

#include "runtime/cpu/parallel.h"

namespace tessera::lab {

inline double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Median microseconds per call of `run(call)`: 15 samples of at least 20 ms each, after 50 ms of
// warm-up (`call` counts every call, so a lab can rotate over copies that overflow the caches).
template <typename Run>
double median_us(Run&& run) {
  int call = 0;
  for (double start = seconds_now(); seconds_now() - start < 0.05;) run(call++);
  std::vector<double> samples;
  for (int sample = 0; sample < 15; ++sample) {
    int calls = 0;
    const double start = seconds_now();
    double elapsed = 0;
    while ((elapsed = seconds_now() - start) < 0.02) {
      run(call++);
      ++calls;
    }
    samples.push_back(1e6 * elapsed / calls);
  }
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  return samples[samples.size() / 2];
}

// GB/s of reading 512 MiB of int64 on the pool's threads (each thread sums its chunks).
inline double read_bandwidth() {
  const int64_t count = (int64_t{512} << 20) / 8;
  std::vector<int64_t> data(static_cast<size_t>(count), 1);
  std::vector<int64_t> sums(static_cast<size_t>(count / (1 << 16)) + 1);
  const double us = median_us([&](int) {
    cpu::parallel_for(count, 1 << 16, [&](int64_t begin, int64_t end) {
      int64_t sum = 0;
      for (int64_t i = begin; i < end; ++i) sum += data[i];
      sums[begin >> 16] = sum;
    });
  });
  return static_cast<double>(count * 8) / (us * 1e3);
}

// A CPU lab's main: `--only TEXT` (cases whose name contains TEXT) and `--skip-timing` (the checks
// only) go to `run`, whose result is the exit status; a usage error exits 2, an exception 1.
inline int cpu_lab_main(std::string_view lab, int argc, char** argv,
                        const std::function<int(std::string_view only, bool skip_timing)>& run) {
  std::string_view only;
  bool skip_timing = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (arg == "--skip-timing") {
      skip_timing = true;
    } else {
      fmt::print(stderr, "usage: {} [--only TEXT] [--skip-timing]\n", lab);
      return 2;
    }
  }
  try {
    return run(only, skip_timing);
  } catch (const std::exception& error) {
    fmt::print(stderr, "{}: {}\n", lab, error.what());
    return 1;
  }
}

}  // namespace tessera::lab
