// The CPU thread pool (runtime/cpu/parallel.h): every index of every job is visited exactly once,
// also for thousands of small jobs back to back (the workers spin between them) and after the
// workers fell asleep; a chunk's exception reaches the caller; nested calls and callers on other
// threads run inline.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/cpu/parallel.h"

using namespace tessera::cpu;

namespace {

// Visits [0, count) and checks that each index was visited once.
void expect_each_index_once(int64_t count, int64_t min_chunk) {
  std::vector<std::atomic<int>> visits(static_cast<size_t>(count));
  parallel_for(count, min_chunk, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) visits[static_cast<size_t>(i)].fetch_add(1);
  });
  for (int64_t i = 0; i < count; ++i) ASSERT_EQ(visits[static_cast<size_t>(i)].load(), 1) << i;
}

TEST(ParallelFor, ThousandsOfSmallJobsBackToBackVisitEachIndexOnce) {
  for (int job = 0; job < 5000; ++job) expect_each_index_once(1 + job % 97, 1);
}

TEST(ParallelFor, JobsAfterTheWorkersFellAsleepStillRunEverywhere) {
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // longer than the workers spin
    expect_each_index_once(10000, 16);
  }
}

TEST(ParallelFor, AChunksExceptionReachesTheCallerAfterEveryChunk) {
  std::atomic<int64_t> visited{0};
  EXPECT_THROW(parallel_for(1000, 1,
                            [&](int64_t begin, int64_t end) {
                              visited += end - begin;
                              if (begin == 0) throw std::runtime_error("chunk 0 failed");
                            }),
               std::runtime_error);
  EXPECT_EQ(visited.load(), 1000);
  expect_each_index_once(1000, 1);  // the pool still works
}

TEST(ParallelFor, NestedCallsAndOtherCallersRunInline) {
  std::atomic<int64_t> inner{0};
  parallel_for(64, 1, [&](int64_t begin, int64_t end) {
    EXPECT_TRUE(in_parallel_region() || num_threads() == 1);
    for (int64_t i = begin; i < end; ++i)
      parallel_for(10, 1, [&](int64_t b, int64_t e) { inner += e - b; });
  });
  EXPECT_EQ(inner.load(), 640);
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([] {
      for (int job = 0; job < 500; ++job) expect_each_index_once(1 + job % 31, 1);
    });
  for (std::thread& caller : callers) caller.join();
}

}  // namespace
