#include "kernels/attention_metadata.h"

#include "runtime/check.h"

namespace tessera {
namespace {
thread_local ForwardContext active_context;
thread_local bool context_set = false;
}  // namespace

void upload_metadata(AttentionMetadata& meta, Device device) {
  auto ints = [&](const std::vector<int32_t>& values) {
    const std::vector<int64_t> wide(values.begin(), values.end());
    return Tensor::from_ints(wide, {static_cast<int64_t>(values.size())}, DType::i32, device);
  };
  meta.device_query_start_loc = ints(meta.query_start_loc);
  meta.device_seq_lens = ints(meta.seq_lens);
  meta.device_block_tables = ints(meta.block_tables);
  meta.device_slot_mapping = ints(meta.slot_mapping);
}

ForwardContext& current_forward_context() {
  TESSERA_REQUIRE(context_set,
                  "attention ran without a forward context: the model runner sets the attention "
                  "metadata and KV caches for each step (ForwardContextScope)");
  return active_context;
}

bool has_forward_context() {
  return context_set;
}

ForwardContextScope::ForwardContextScope(ForwardContext context)
    : previous_(active_context), had_previous_(context_set) {
  active_context = context;
  context_set = true;
}

ForwardContextScope::~ForwardContextScope() {
  active_context = previous_;
  context_set = had_previous_;
}

}  // namespace tessera
