// A one-line progress bar on stderr, drawn only when stderr is a terminal, so that logs piped to
// a file and the product on stdout stay clean.
#pragma once

#include <string>

namespace tessera::bench {

class ProgressBar {
 public:
  ProgressBar();
  // Redraws the line: "[####      ] 4/10 what".
  void update(size_t done, size_t total, const std::string& what);
  // Ends the line, once something was drawn.
  void finish();

 private:
  bool terminal_;
  bool drawn_ = false;
};

}  // namespace tessera::bench
