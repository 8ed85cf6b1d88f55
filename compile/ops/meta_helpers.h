// Checks and shape rules shared by the ops' meta functions. Every failure names the op, the
// argument and the shapes involved.
#pragma once

#include <functional>
#include <initializer_list>
#include <string>

#include "compile/ir/op_registry.h"

namespace tessera {

[[noreturn]] void throw_argument_error(const MetaArgs& args, size_t index, const std::string& why);

void require_float(const MetaArgs& args, size_t index);
void require_dtype_in(const MetaArgs& args, size_t index, std::initializer_list<DType> allowed);
void require_same_dtype(const MetaArgs& args, size_t first, size_t second);
void require_rank_at_least(const MetaArgs& args, size_t index, int64_t rank);
void require_rank(const MetaArgs& args, size_t index, int64_t rank);
// A quantized input's last size is a constant number of whole blocks of its dtype.
void require_whole_blocks(const MetaArgs& args, size_t index);
// True when a == b; decides symbolically, recording a guard while tracing if it must.
bool sizes_equal(const SymInt& a, const SymInt& b, const char* why);
// The broadcast shape of the given inputs (NumPy rules).
SymShape broadcast_shapes(const MetaArgs& args, std::initializer_list<size_t> indices);
SymShape broadcast_shapes(const MetaArgs& args, std::span<const size_t> indices);
// Wraps a possibly negative dim for an input of `rank`, naming the op when out of range.
int64_t wrap_dim_for(const MetaArgs& args, int64_t dim, int64_t rank);
// A canonicalize function that wraps the named int attributes (dims of input 0) to >= 0.
std::function<void(std::span<const TensorMeta>, Attributes&)> wrap_dim_attributes(
    std::vector<std::string> names);
// The shape a reshape/view to `sizes` (one -1 allowed) of `shape` gives.
SymShape infer_view_shape(const MetaArgs& args, const SymShape& shape,
                          const std::vector<int64_t>& sizes);

}  // namespace tessera
