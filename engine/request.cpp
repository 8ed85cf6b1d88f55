#include "engine/request.h"

namespace tessera {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::none:
      return "";
    case FinishReason::stop:
      return "stop";
    case FinishReason::length:
      return "length";
    case FinishReason::abort:
      return "abort";
    case FinishReason::error:
      return "error";
  }
  return "";
}

void OutputStream::push(RequestOutput output) {
  {
    std::lock_guard lock(mutex_);
    outputs_.push_back(std::move(output));
  }
  ready_.notify_all();
}

std::optional<RequestOutput> OutputStream::pop(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!ready_.wait_for(lock, timeout, [&] { return !outputs_.empty(); })) return std::nullopt;
  RequestOutput output = std::move(outputs_.front());
  outputs_.pop_front();
  return output;
}

}  // namespace tessera
