// The engine on its own thread, for the server (vLLM's AsyncLLM): HTTP threads validate and
// enqueue requests and read their OutputStreams; only the engine thread touches the LLMEngine.
// The loop sleeps while there is nothing to do. Shutdown stops admission, lets running requests
// finish until a deadline, then aborts what is left.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/llm_engine.h"

namespace tessera {

// The engine's queue is full (max_waiting_requests): the server answers 503.
class EngineOverloaded : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class AsyncEngine {
 public:
  // `max_waiting_requests`: requests queued but not yet running, beyond which add_request throws
  // EngineOverloaded.
  AsyncEngine(std::unique_ptr<LLMEngine> engine, int64_t max_waiting_requests);
  ~AsyncEngine();

  // Any thread. Validates (tessera::Error naming the field), then queues; outputs go to `stream`
  // (a new one when null), which is returned. Throws EngineOverloaded when the queue is full or
  // the engine is shutting down.
  std::shared_ptr<OutputStream> add_request(const std::string& id, std::vector<int32_t> prompt_ids,
                                            const SamplingParams& params,
                                            std::shared_ptr<OutputStream> stream = nullptr);
  struct NewRequest {
    std::string id;
    std::vector<int32_t> prompt_ids;
    SamplingParams params;
    int64_t priority = 0;
  };
  // Several requests into one stream, all or none (none is queued, so none is aborted, when the
  // queue has no room for all of them).
  void add_requests(std::vector<NewRequest> requests, std::shared_ptr<OutputStream> stream);
  int64_t max_waiting_requests() const { return max_waiting_requests_; }
  void abort(const std::string& id);  // any thread; the stream gets a final abort output
  // Stops admission, waits up to `grace` for unfinished requests, aborts the rest, joins.
  void shutdown(std::chrono::milliseconds grace);

  EngineMetrics metrics() const { return engine_->metrics().snapshot(); }
  // A grammar compile on a handler thread, for the metrics (they take their own lock).
  void observe_grammar_compile(double seconds) {
    engine_->metrics().update([&](EngineMetrics& m) { m.grammar_compile_time.observe(seconds); });
  }
  const LLMEngine& engine() const { return *engine_; }  // its constant parts only

 private:
  void loop();

  std::unique_ptr<LLMEngine> engine_;
  const int64_t max_waiting_requests_;
  struct Pending {
    std::string id;
    std::vector<int32_t> prompt_ids;
    SamplingParams params;
    int64_t priority = 0;
    std::shared_ptr<OutputStream> stream;
  };
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Pending> inbox_;
  std::vector<std::string> aborts_;
  bool accepting_ = true;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point abort_deadline_;
  std::atomic<int64_t> queued_{0};  // in the inbox or waiting in the scheduler
  std::thread thread_;
};

}  // namespace tessera
