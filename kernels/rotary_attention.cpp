// rotary_attention as its two ops apart: see rotary_attention.h. Registered as the CPU kernel.
#include "kernels/rotary_attention.h"

#include "runtime/check.h"
#include "runtime/tensor.h"

namespace tessera {

QkvWidths qkv_widths(const Attributes& attributes) {
  const int64_t heads = attributes.get_int("num_heads");
  const int64_t kv_heads = attributes.get_int("num_kv_heads");
  const int64_t head_size = attributes.get_int("head_size");
  // Bounds that keep (heads + 2 kv_heads) * head_size far from overflow.
  constexpr int64_t kMaxHeads = int64_t{1} << 24;
  constexpr int64_t kMaxHeadSize = int64_t{1} << 16;
  TESSERA_REQUIRE(heads > 0 && heads <= kMaxHeads && kv_heads > 0 && kv_heads <= kMaxHeads &&
                      head_size > 0 && head_size <= kMaxHeadSize,
                  "rotary_attention: num_heads ({}) and num_kv_heads ({}) must be in [1, {}] and "
                  "head_size ({}) in [1, {}]",
                  heads, kv_heads, kMaxHeads, head_size, kMaxHeadSize);
  return {heads * head_size, kv_heads * head_size};
}

Attributes rotary_embedding_attributes(const Attributes& attributes) {
  return {{"head_size", attributes.get_int("head_size")},
          {"is_neox", attributes.get_bool("is_neox", true)}};
}

Attributes attention_attributes(const Attributes& attributes) {
  Attributes out;
  for (const auto& [name, value] : attributes.items())
    if (name != "is_neox") out.set(name, value);
  return out;
}

void rotate_then_attend(const KernelArgs& args) {
  TESSERA_CHECK(args.inputs.size() == 3 && args.outputs.size() == 4,
                "rotary_attention takes 3 inputs and 4 outputs, got {} and {}", args.inputs.size(),
                args.outputs.size());
  const Tensor& positions = args.inputs[0];
  const Tensor& qkv = args.inputs[1];
  const Tensor& cos_sin_cache = args.inputs[2];
  const QkvWidths width = qkv_widths(args.attributes);
  TESSERA_REQUIRE(qkv.dim() == 2 && qkv.size(1) == width.query + 2 * width.key,
                  "rotary_attention: qkv {} must have {} columns", qkv.str(),
                  width.query + 2 * width.key);
  Tensor& out = args.outputs[0];
  Tensor& rotated_query = args.outputs[1];
  Tensor& rotated_key = args.outputs[2];
  Tensor& value = args.outputs[3];
  const DeviceType device = qkv.device().type;
  // The unrotated query into the attention's output and the key into the value's, for now.
  out.copy_from(qkv.slice(1, 0, width.query));
  value.copy_from(qkv.slice(1, width.query, width.query + width.key));
  {
    const Tensor rotary_inputs[] = {positions, out, value, cos_sin_cache};
    Tensor rotary_outputs[] = {rotated_query, rotated_key};
    const Attributes attributes = rotary_embedding_attributes(args.attributes);
    run_kernel("rotary_embedding", device, KernelArgs{rotary_inputs, attributes, rotary_outputs});
  }
  value.copy_from(qkv.slice(1, width.query + width.key, width.query + 2 * width.key));
  const Tensor attention_inputs[] = {rotated_query, rotated_key, value};
  Tensor attention_outputs[] = {out};
  const Attributes attributes = attention_attributes(args.attributes);
  run_kernel("attention", device, KernelArgs{attention_inputs, attributes, attention_outputs});
}

TESSERA_REGISTER_KERNEL("rotary_attention", DeviceType::cpu, rotate_then_attend);

}  // namespace tessera
