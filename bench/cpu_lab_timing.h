// What the CPU labs (quantized_cpu_lab, moe_cpu_lab) share: wall-clock medians of repeated calls
// and the read bandwidth their GB/s figures are set against, measured on the thread pool the
// kernels use (TESSERA_NUM_THREADS).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
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

}  // namespace tessera::lab
