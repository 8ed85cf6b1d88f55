#include "runtime/cpu/parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/check.h"

namespace tessera::cpu {
namespace {

thread_local bool inside_region = false;

int threads_from_environment() {
  if (const char* text = std::getenv("TESSERA_NUM_THREADS")) {
    char* end = nullptr;
    long value = std::strtol(text, &end, 10);
    TESSERA_REQUIRE(end != text && *end == '\0' && value >= 1 && value <= 4096,
                    "TESSERA_NUM_THREADS='{}' is not a thread count; set it to an integer >= 1",
                    text);
    return static_cast<int>(value);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

// Workers sleep until a job is published, claim chunk indices from a shared counter, and leave.
// The caller runs chunks too, then waits until every worker that joined the job has left it, so
// that no worker can still be using the job's function and context once parallel_for returns.
class ThreadPool {
 public:
  explicit ThreadPool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
  }

  ~ThreadPool() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& worker : workers_) worker.join();
  }

  // False when another thread is already running a job; the caller then runs inline.
  bool try_run(int64_t count, int64_t chunk_size, ChunkFn fn, const void* context) {
    std::unique_lock submit(submit_mutex_, std::try_to_lock);
    if (!submit.owns_lock()) return false;
    {
      std::lock_guard lock(mutex_);
      fn_ = fn;
      context_ = context;
      count_ = count;
      chunk_size_ = chunk_size;
      next_chunk_.store(0);
      error_ = nullptr;
      job_open_ = true;
      ++generation_;
    }
    wake_.notify_all();
    inside_region = true;
    run_chunks();
    inside_region = false;
    std::unique_lock lock(mutex_);
    job_open_ = false;
    done_.wait(lock, [&] { return active_workers_ == 0; });
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    return true;
  }

 private:
  void run_chunks() {
    int64_t chunks = (count_ + chunk_size_ - 1) / chunk_size_;
    for (int64_t chunk = next_chunk_.fetch_add(1); chunk < chunks;
         chunk = next_chunk_.fetch_add(1)) {
      int64_t begin = chunk * chunk_size_;
      try {
        fn_(context_, begin, std::min(count_, begin + chunk_size_));
      } catch (...) {
        std::lock_guard lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
    }
  }

  void worker_loop() {
    inside_region = true;
    uint64_t seen_generation = 0;
    std::unique_lock lock(mutex_);
    while (true) {
      wake_.wait(lock, [&] { return stop_ || (job_open_ && seen_generation != generation_); });
      if (stop_) return;
      seen_generation = generation_;
      ++active_workers_;
      lock.unlock();
      run_chunks();
      lock.lock();
      if (--active_workers_ == 0) done_.notify_all();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex submit_mutex_;  // one job at a time
  std::mutex mutex_;         // guards everything below except next_chunk_
  std::condition_variable wake_;
  std::condition_variable done_;
  bool stop_ = false;
  bool job_open_ = false;
  uint64_t generation_ = 0;
  int active_workers_ = 0;
  ChunkFn fn_ = nullptr;
  const void* context_ = nullptr;
  int64_t count_ = 0;
  int64_t chunk_size_ = 1;
  std::atomic<int64_t> next_chunk_{0};
  std::exception_ptr error_;
};

ThreadPool& pool() {
  static ThreadPool instance(num_threads());
  return instance;
}

}  // namespace

int num_threads() {
  static const int threads = threads_from_environment();
  return threads;
}

bool in_parallel_region() {
  return inside_region;
}

void parallel_for_erased(int64_t count, int64_t min_chunk, ChunkFn fn, const void* context) {
  if (count <= 0) return;
  int threads = num_threads();
  min_chunk = std::max<int64_t>(min_chunk, 1);
  // A few chunks per thread let a thread that finishes early (the cores are shared) take more.
  int64_t chunks = std::min<int64_t>((count + min_chunk - 1) / min_chunk, int64_t{threads} * 4);
  if (threads == 1 || chunks <= 1 || inside_region) {
    fn(context, 0, count);
    return;
  }
  int64_t chunk_size = (count + chunks - 1) / chunks;
  if (!pool().try_run(count, chunk_size, fn, context)) fn(context, 0, count);
}

}  // namespace tessera::cpu
