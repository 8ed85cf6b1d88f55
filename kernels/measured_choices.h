// Measured choices: which implementation a problem runs (a linear's path and cuBLASLt algorithm,
// a gated linear's fused kernel or two steps), timed on its first call. A process keeps them in
// memory; with a store installed (the compiler installs one in compilation.cache_dir,
// compile/codegen/measured_choice_files.h) they also outlive it, so a later process on the same
// device and build takes the same choices without timing again: warm starts skip the timing, and
// repeated runs of one build run the same kernels.
//
// Keys are plain text: `device` names what a choice is only valid for (the GPU, its driver and
// libraries, the kernel module's build), `problem` the shape and operands. A choice read back is
// the caller's to validate (a stale or hand-edited file must not crash a run): an unusable one is
// measured again and replaced.
#pragma once

#include <memory>
#include <optional>
#include <string>

namespace tessera {

class MeasuredChoiceStore {
 public:
  virtual ~MeasuredChoiceStore() = default;
  // The choice recorded for `problem` on `device`, if any.
  virtual std::optional<std::string> find(const std::string& device,
                                          const std::string& problem) = 0;
  // Records (or replaces) it. Must not throw: a store that cannot write keeps it in memory.
  virtual void record(const std::string& device, const std::string& problem,
                      const std::string& choice) = 0;
};

// Installs the store choices persist in (nullptr: none, the default; each process measures).
void set_measured_choice_store(std::shared_ptr<MeasuredChoiceStore> store);
// The installed store's choice, or nullopt when there is none (or no store).
std::optional<std::string> find_measured_choice(const std::string& device,
                                                const std::string& problem);
// Records in the installed store; nothing without one.
void record_measured_choice(const std::string& device, const std::string& problem,
                            const std::string& choice);

}  // namespace tessera
