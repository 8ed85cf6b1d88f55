#include "engine/async_engine.h"

#include <spdlog/spdlog.h>

namespace tessera {

AsyncEngine::AsyncEngine(std::unique_ptr<LLMEngine> engine, int64_t max_waiting_requests)
    : engine_(std::move(engine)), max_waiting_requests_(max_waiting_requests) {
  thread_ = std::thread([this] { loop(); });
}

AsyncEngine::~AsyncEngine() {
  shutdown(std::chrono::milliseconds(0));
}

std::shared_ptr<OutputStream> AsyncEngine::add_request(const std::string& id,
                                                       std::vector<int32_t> prompt_ids,
                                                       const SamplingParams& params,
                                                       std::shared_ptr<OutputStream> stream) {
  if (!stream) stream = std::make_shared<OutputStream>();
  std::vector<NewRequest> one;
  one.push_back({id, std::move(prompt_ids), params});
  add_requests(std::move(one), stream);
  return stream;
}

void AsyncEngine::add_requests(std::vector<NewRequest> requests,
                               std::shared_ptr<OutputStream> stream) {
  for (const NewRequest& request : requests)
    engine_->validate_request(request.prompt_ids, request.params, request.priority);
  {
    std::lock_guard lock(mutex_);
    if (!accepting_) throw EngineOverloaded("the server is shutting down");
    const int64_t count = static_cast<int64_t>(requests.size());
    if (queued_.load() + count > max_waiting_requests_)
      throw EngineOverloaded("too many requests are waiting (" +
                             std::to_string(max_waiting_requests_) + "); retry later");
    queued_ += count;
    for (NewRequest& request : requests)
      inbox_.push_back(Pending{std::move(request.id), std::move(request.prompt_ids), request.params,
                               request.priority, stream});
  }
  wake_.notify_one();
}

void AsyncEngine::abort(const std::string& id) {
  {
    std::lock_guard lock(mutex_);
    aborts_.push_back(id);
  }
  wake_.notify_one();
}

void AsyncEngine::shutdown(std::chrono::milliseconds grace) {
  {
    std::lock_guard lock(mutex_);
    if (!thread_.joinable()) return;
    accepting_ = false;
    stopping_ = true;
    abort_deadline_ = std::chrono::steady_clock::now() + grace;
  }
  wake_.notify_one();
  thread_.join();
}

void AsyncEngine::loop() {
  while (true) {
    std::vector<Pending> inbox;
    std::vector<std::string> aborts;
    bool stopping = false;
    std::chrono::steady_clock::time_point deadline;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] {
        return !inbox_.empty() || !aborts_.empty() || stopping_ || engine_->has_unfinished();
      });
      inbox.swap(inbox_);
      aborts.swap(aborts_);
      stopping = stopping_;
      deadline = abort_deadline_;
    }
    for (Pending& pending : inbox) {
      try {
        engine_->add_request(pending.id, std::move(pending.prompt_ids), pending.params,
                             pending.stream, pending.priority);
      } catch (const std::exception& error) {  // e.g. an id in use: this request fails alone
        RequestOutput output;
        output.request_id = pending.id;
        output.finish_reason = FinishReason::error;
        output.error = error.what();
        pending.stream->push(std::move(output));
      }
    }
    for (const std::string& id : aborts) engine_->abort(id);
    if (stopping && (std::chrono::steady_clock::now() >= deadline || !engine_->has_unfinished())) {
      // Whatever is left is aborted, so every reader gets its final output.
      while (engine_->has_unfinished()) {
        std::vector<std::string> ids = engine_->unfinished_ids();
        for (const std::string& id : ids) engine_->abort(id);
      }
      return;
    }
    if (engine_->has_unfinished()) {
      try {
        engine_->step();
      } catch (const std::exception& error) {
        spdlog::error("engine step failed, failing its requests: {}", error.what());
        engine_->fail_all(std::string("internal engine error: ") + error.what());
      }
    }
    queued_.store(static_cast<int64_t>(engine_->scheduler().num_waiting()) + [&] {
      std::lock_guard lock(mutex_);
      return static_cast<int64_t>(inbox_.size());
    }());
  }
}

}  // namespace tessera
