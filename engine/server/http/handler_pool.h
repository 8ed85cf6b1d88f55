// The threads that run the slow routes' handlers (completions: parse, tokenize, wait on the
// engine, write), so that the event loop never blocks. A handler is queued only once its whole
// request has arrived, so a slow client holds no thread while it sends.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera {

class HandlerPool {
 public:
  explicit HandlerPool(int threads);
  ~HandlerPool();  // runs what is queued, then joins

  void submit(std::function<void()> task);

 private:
  void work();

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace tessera
