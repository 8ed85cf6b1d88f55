// Collectives among the ranks of a tensor-parallel group (one rank per device): the interface the
// all_reduce and all_gather ops call, with a CPU implementation (ranks as threads of one process,
// sharing memory: the sharding logic runs in CI without GPUs) and an NCCL one in the CUDA module
// (RCCL in the HIP module). A group is made whole by create_communicators, one communicator per
// rank; each rank's thread installs its own with CommunicatorScope.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "runtime/check.h"
#include "runtime/device.h"
#include "runtime/tensor.h"

namespace tessera {

// What a rank's collective throws when another rank of its group failed (abort()): that other
// rank's error is the one to report.
class CollectiveAborted : public Error {
 public:
  using Error::Error;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every rank calls each collective in the same order with tensors of the same shape and dtype,
  // contiguous, on this rank's device; GPU collectives are queued on the current stream (and so
  // are captured into graphs).
  // output = the element-wise sum of every rank's input (f16/bf16 are summed in f32 on the CPU).
  virtual void all_reduce_sum(const Tensor& input, Tensor& output) = 0;
  // output [size * n, ...] = every rank's input [n, ...], stacked along dim 0 in rank order.
  virtual void all_gather(const Tensor& input, Tensor& output) = 0;
  // tensor = the root rank's tensor, on every rank.
  virtual void broadcast(Tensor& tensor, int root) = 0;
  // A rank failed: every collective of the group blocked now or called later throws instead of
  // waiting for it. Callable from any thread, more than once.
  virtual void abort() = 0;
};

// `size` CPU communicators sharing one rendezvous: rank r's collectives meet the other ranks'
// calls made from other threads of this process.
std::vector<std::unique_ptr<Communicator>> make_cpu_communicators(int size);

// Makes a group, rank r on device index devices[r]; registered per device type (the CPU here,
// NCCL by the CUDA module when it loads).
using CommunicatorFactory =
    std::vector<std::unique_ptr<Communicator>> (*)(std::span<const int> devices);
bool register_communicator_factory(DeviceType type, CommunicatorFactory factory);
// A group for `devices` of `type` (loading its module first); throws naming
// engine.tensor_parallel_size and what is missing where the type has no collectives.
std::vector<std::unique_ptr<Communicator>> create_communicators(DeviceType type,
                                                                std::span<const int> devices);

// The communicator of the rank this thread runs (nullptr outside a tensor-parallel rank).
Communicator* current_communicator();
// Throws naming `op` when this thread runs no rank.
Communicator& require_communicator(const char* op);

class CommunicatorScope {
 public:
  explicit CommunicatorScope(Communicator* communicator);
  ~CommunicatorScope();
  CommunicatorScope(const CommunicatorScope&) = delete;
  CommunicatorScope& operator=(const CommunicatorScope&) = delete;

 private:
  Communicator* previous_;
};

}  // namespace tessera
