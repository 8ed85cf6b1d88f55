// Requests the server refused, by reason, for /metrics (tessera:request_rejected_total): the
// statuses of error responses grouped into what an operator acts on (bad input, a missing key,
// overload, timeouts, oversized or unsupported requests). Any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace tessera {

class RejectionCounts {
 public:
  void count(int status);  // a response's status; those that are no refusal are not counted
  // Prometheus text: one counter sample per reason.
  std::string render_prometheus(const std::string& model_name) const;

 private:
  static constexpr std::array<const char*, 7> reasons = {
      "invalid_request", "unauthorized", "not_found", "timeout",
      "too_large",       "unsupported",  "overloaded"};
  std::array<std::atomic<int64_t>, reasons.size()> counts_{};
};

}  // namespace tessera
