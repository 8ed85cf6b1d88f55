// The CPU communicator: the ranks are threads of one process, so a collective is a rendezvous.
// Each rank posts its tensor and waits until all have; then each reads every rank's tensor
// (summing in rank order, in f32, so all ranks compute identical bits) and waits again before
// returning, so no input is overwritten while another rank still reads it.
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>

#include "runtime/check.h"
#include "runtime/communicator.h"
#include "runtime/half.h"

namespace tessera {
namespace {

// What the ranks of one group share.
class Rendezvous {
 public:
  explicit Rendezvous(int size) : size_(size), posted_(static_cast<size_t>(size)) {}

  int size() const { return size_; }

  // Posts `tensor` for `rank` and waits for every rank's; throws when the group was aborted
  // before every rank arrived.
  void arrive(int rank, const Tensor* tensor) {
    posted_[static_cast<size_t>(rank)] = tensor;
    wait_for_all(/*abortable=*/true);
  }
  // Waits until every rank is done reading the posted tensors. Not abortable: every rank that
  // arrived departs (also after an error, see run), so no rank's tensor dies while another reads
  // it.
  void depart() { wait_for_all(/*abortable=*/false); }
  const Tensor& posted(int rank) const { return *posted_[static_cast<size_t>(rank)]; }

  void abort() {
    std::lock_guard lock(mutex_);
    aborted_ = true;
    changed_.notify_all();
  }

 private:
  // A reusable barrier: the last rank to arrive opens the current generation.
  void wait_for_all(bool abortable) {
    std::unique_lock lock(mutex_);
    if (abortable && aborted_) throw_aborted();
    const uint64_t generation = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
      return;
    }
    changed_.wait(lock, [&] { return (abortable && aborted_) || generation_ != generation; });
    if (generation_ == generation) throw_aborted();
  }

  [[noreturn]] static void throw_aborted() {
    throw CollectiveAborted(
        "tensor parallel: another rank of the group failed, so this rank's collective was "
        "abandoned (its error is the one to read)");
  }

  const int size_;
  std::vector<const Tensor*> posted_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
};

void require_cpu_tensor(const char* op, const char* what, const Tensor& tensor) {
  TESSERA_REQUIRE(tensor.device().is_cpu() && tensor.is_contiguous(),
                  "{}: the CPU communicator needs a contiguous CPU tensor as {}, got {}", op, what,
                  tensor.str());
}

void require_same_layout(const char* op, const Tensor& mine, const Tensor& theirs, int rank) {
  TESSERA_REQUIRE(mine.dtype() == theirs.dtype() && mine.sizes() == theirs.sizes(),
                  "{}: rank {} posted {} where this rank has {}: every rank must call the same "
                  "collectives in the same order",
                  op, rank, theirs.str(), mine.str());
}

class CpuCommunicator final : public Communicator {
 public:
  CpuCommunicator(std::shared_ptr<Rendezvous> rendezvous, int rank)
      : rendezvous_(std::move(rendezvous)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return rendezvous_->size(); }

  void all_reduce_sum(const Tensor& input, Tensor& output) override {
    require_cpu_tensor("all_reduce", "input", input);
    require_cpu_tensor("all_reduce", "output", output);
    TESSERA_REQUIRE(output.sizes() == input.sizes() && output.dtype() == input.dtype(),
                    "all_reduce: output {} must match input {}", output.str(), input.str());
    run(&input, [&] {
      for (int r = 0; r < size(); ++r) require_same_layout("all_reduce", input, posted(r), r);
      visit_dtype(input.dtype(), [&]<typename T>() { sum_into<T>(output); });
    });
  }

  void all_gather(const Tensor& input, Tensor& output) override {
    require_cpu_tensor("all_gather", "input", input);
    require_cpu_tensor("all_gather", "output", output);
    TESSERA_REQUIRE(input.dim() >= 1 && output.dim() == input.dim() &&
                        output.size(0) == input.size(0) * size() && output.dtype() == input.dtype(),
                    "all_gather: output {} must be the input {} with {} times the rows",
                    output.str(), input.str(), size());
    run(&input, [&] {
      for (int r = 0; r < size(); ++r) require_same_layout("all_gather", input, posted(r), r);
      auto* destination = static_cast<char*>(output.data_ptr());
      for (int r = 0; r < size(); ++r)
        std::memcpy(destination + r * input.nbytes(), posted(r).data_ptr(), input.nbytes());
    });
  }

  void broadcast(Tensor& tensor, int root) override {
    require_cpu_tensor("broadcast", "tensor", tensor);
    TESSERA_REQUIRE(root >= 0 && root < size(), "broadcast: root {} is not a rank of {}", root,
                    size());
    run(&tensor, [&] {
      require_same_layout("broadcast", tensor, posted(root), root);
      if (rank_ != root) std::memcpy(tensor.data_ptr(), posted(root).data_ptr(), tensor.nbytes());
    });
  }

  void abort() override { rendezvous_->abort(); }

 private:
  const Tensor& posted(int rank) const { return rendezvous_->posted(rank); }

  // Posts `mine`, runs `work` over every rank's posted tensor, and departs even when `work`
  // threw (every rank sees the same posted tensors, so a mismatch fails them all alike).
  template <typename Work>
  void run(const Tensor* mine, const Work& work) {
    rendezvous_->arrive(rank_, mine);
    std::exception_ptr failure;
    try {
      work();
    } catch (...) {
      failure = std::current_exception();
    }
    rendezvous_->depart();
    if (failure) std::rethrow_exception(failure);
  }

  template <typename T>
  void sum_into(Tensor& output) const {
    const int64_t count = output.numel();
    T* out = output.data<T>();
    if constexpr (std::is_integral_v<T>) {
      for (int64_t i = 0; i < count; ++i) {
        T total = 0;
        for (int r = 0; r < size(); ++r) total += posted(r).data<T>()[i];
        out[i] = total;
      }
    } else {
      for (int64_t i = 0; i < count; ++i) {
        float total = 0.0f;
        for (int r = 0; r < size(); ++r) total += static_cast<float>(posted(r).data<T>()[i]);
        out[i] = T(total);
      }
    }
  }

  std::shared_ptr<Rendezvous> rendezvous_;
  int rank_;
};

// Ranks are threads sharing the host, so every rank's device is cpu (index 0).
std::vector<std::unique_ptr<Communicator>> cpu_group(std::span<const int> devices) {
  for (int index : devices)
    TESSERA_REQUIRE(index == 0, "tensor parallel on the CPU: every rank runs on cpu, not cpu:{}",
                    index);
  return make_cpu_communicators(static_cast<int>(devices.size()));
}

[[maybe_unused]] const bool cpu_factory_registered =
    register_communicator_factory(DeviceType::cpu, cpu_group);

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_cpu_communicators(int size) {
  TESSERA_REQUIRE(size >= 1, "a communicator group needs at least one rank, got {}", size);
  auto rendezvous = std::make_shared<Rendezvous>(size);
  std::vector<std::unique_ptr<Communicator>> group;
  for (int rank = 0; rank < size; ++rank)
    group.push_back(std::make_unique<CpuCommunicator>(rendezvous, rank));
  return group;
}

}  // namespace tessera
