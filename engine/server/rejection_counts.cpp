#include "engine/server/rejection_counts.h"

#include <fmt/format.h>

namespace tessera {
namespace {

// The index into `reasons` of a status, or -1.
int reason_of(int status) {
  switch (status) {
    case 400:
      return 0;
    case 401:
      return 1;
    case 404:
    case 405:
      return 2;
    case 408:
      return 3;
    case 413:
    case 431:
      return 4;
    case 415:
    case 417:
    case 501:
    case 505:
      return 5;
    case 503:
      return 6;
    default:
      return -1;
  }
}

}  // namespace

void RejectionCounts::count(int status) {
  const int reason = reason_of(status);
  if (reason >= 0) ++counts_[static_cast<size_t>(reason)];
}

std::string RejectionCounts::render_prometheus(const std::string& model_name) const {
  std::string out =
      "# HELP tessera:request_rejected_total Requests refused before or instead of running, by "
      "reason.\n# TYPE tessera:request_rejected_total counter\n";
  for (size_t i = 0; i < reasons.size(); ++i)
    out += fmt::format("tessera:request_rejected_total{{model_name=\"{}\",reason=\"{}\"}} {}\n",
                       model_name, reasons[i], counts_[i].load());
  return out;
}

}  // namespace tessera
