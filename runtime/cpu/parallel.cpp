#include "runtime/cpu/parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/check.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

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

// Between jobs a worker spins for a while before it sleeps: a decode step runs a hundred small
// jobs back to back, and waking a sleeping thread costs tens of microseconds, as long as a job.
constexpr auto kSpinBeforeSleeping = std::chrono::microseconds(200);

inline void spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Workers wait for a job to be published (a new generation), claim chunk indices from a shared
// counter, and leave. The caller runs chunks too, closes the job, then waits until every worker
// that joined it has left, so that no worker can still be using the job's function and context
// once parallel_for returns. A worker joins by counting itself active and then checking that the
// job it saw is still open: once the caller has closed it, a late worker backs off.
class ThreadPool {
 public:
  explicit ThreadPool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
  }

  ~ThreadPool() {
    {
      std::lock_guard lock(mutex_);
      stop_.store(true);
    }
    wake_.notify_all();
    for (std::thread& worker : workers_) worker.join();
  }

  // False when another thread is already running a job; the caller then runs inline.
  bool try_run(int64_t count, int64_t chunk_size, ChunkFn fn, const void* context) {
    std::unique_lock submit(submit_mutex_, std::try_to_lock);
    if (!submit.owns_lock()) return false;
    fn_ = fn;
    context_ = context;
    count_ = count;
    chunk_size_ = chunk_size;
    next_chunk_.store(0);
    error_ = nullptr;
    job_open_.store(true);
    generation_.fetch_add(1);
    if (sleepers_.load() > 0) {
      std::lock_guard lock(mutex_);  // a worker between its check and its wait holds it
      wake_.notify_all();
    }
    inside_region = true;
    run_chunks();
    inside_region = false;
    job_open_.store(false);
    while (active_workers_.load() != 0) spin_pause();
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    return true;
  }

 private:
  void run_chunks() {
    const int64_t chunks = (count_ + chunk_size_ - 1) / chunk_size_;
    for (int64_t chunk = next_chunk_.fetch_add(1); chunk < chunks;
         chunk = next_chunk_.fetch_add(1)) {
      const int64_t begin = chunk * chunk_size_;
      try {
        fn_(context_, begin, std::min(count_, begin + chunk_size_));
      } catch (...) {
        std::lock_guard lock(error_mutex_);
        if (!error_) error_ = std::current_exception();
      }
    }
  }

  // The next generation after `seen` (or any, once stopping): spinning first, then asleep.
  uint64_t wait_for_job(uint64_t seen) {
    const auto sleep_at = std::chrono::steady_clock::now() + kSpinBeforeSleeping;
    for (int spins = 0;; ++spins) {
      const uint64_t generation = generation_.load();
      if (generation != seen || stop_.load()) return generation;
      if (spins % 64 == 63 && std::chrono::steady_clock::now() >= sleep_at) break;
      spin_pause();
    }
    std::unique_lock lock(mutex_);
    sleepers_.fetch_add(1);
    wake_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
    sleepers_.fetch_sub(1);
    return generation_.load();
  }

  void worker_loop() {
    inside_region = true;
    uint64_t seen = 0;
    while (true) {
      const uint64_t generation = wait_for_job(seen);
      if (stop_.load()) return;
      seen = generation;
      active_workers_.fetch_add(1);
      if (job_open_.load() && generation_.load() == generation) run_chunks();
      active_workers_.fetch_sub(1);
    }
  }

  std::vector<std::thread> workers_;
  std::mutex submit_mutex_;  // one job at a time
  std::mutex mutex_;         // with wake_: sleeping workers
  std::condition_variable wake_;
  std::atomic<bool> stop_{false};
  std::atomic<int> sleepers_{0};
  // The job: written by the caller before it opens the job (generation_ and job_open_, sequentially
  // consistent like every atomic here), read by workers that joined it while open.
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> job_open_{false};
  std::atomic<int> active_workers_{0};
  ChunkFn fn_ = nullptr;
  const void* context_ = nullptr;
  int64_t count_ = 0;
  int64_t chunk_size_ = 1;
  std::atomic<int64_t> next_chunk_{0};
  std::mutex error_mutex_;
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
