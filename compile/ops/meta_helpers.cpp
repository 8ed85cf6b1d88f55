#include "compile/ops/meta_helpers.h"

#include "runtime/check.h"

namespace tessera {

void throw_argument_error(const MetaArgs& args, size_t index, const std::string& why) {
  throw Error(fmt::format("{}: argument '{}' ({}) {}", args.op.name, args.input_name(index),
                          args.input(index).str(), why));
}

void require_float(const MetaArgs& args, size_t index) {
  if (!is_floating(args.input(index).dtype))
    throw_argument_error(args, index, "must be a float tensor (f32, f16 or bf16)");
}

void require_dtype_in(const MetaArgs& args, size_t index, std::initializer_list<DType> allowed) {
  for (DType dtype : allowed)
    if (args.input(index).dtype == dtype) return;
  std::vector<std::string> names;
  for (DType dtype : allowed) names.push_back(dtype_name(dtype));
  throw_argument_error(args, index, fmt::format("must have dtype {}", fmt::join(names, " or ")));
}

void require_same_dtype(const MetaArgs& args, size_t first, size_t second) {
  if (args.input(first).dtype != args.input(second).dtype) {
    throw Error(
        fmt::format("{}: arguments '{}' ({}) and '{}' ({}) must have the same dtype; "
                    "cast one of them",
                    args.op.name, args.input_name(first), args.input(first).str(),
                    args.input_name(second), args.input(second).str()));
  }
}

void require_rank_at_least(const MetaArgs& args, size_t index, int64_t rank) {
  if (args.input(index).rank() < rank)
    throw_argument_error(args, index, fmt::format("must have at least {} dimension(s)", rank));
}

void require_rank(const MetaArgs& args, size_t index, int64_t rank) {
  if (args.input(index).rank() != rank)
    throw_argument_error(args, index, fmt::format("must have exactly {} dimension(s)", rank));
}

void require_whole_blocks(const MetaArgs& args, size_t index) {
  const TensorMeta& meta = args.input(index);
  const int64_t block = block_elements(meta.dtype);
  if (meta.rank() < 1 || !meta.shape.back().is_constant() ||
      meta.shape.back().constant() % block != 0)
    throw_argument_error(args, index,
                         fmt::format("is {}: its last size must be a constant multiple of its "
                                     "block of {}",
                                     dtype_name(meta.dtype), block));
}

bool sizes_equal(const SymInt& a, const SymInt& b, const char* why) {
  return (a == b).guard_bool(why);
}

SymShape broadcast_shapes(const MetaArgs& args, std::initializer_list<size_t> indices) {
  return broadcast_shapes(args, std::span<const size_t>(indices.begin(), indices.size()));
}

SymShape broadcast_shapes(const MetaArgs& args, std::span<const size_t> indices) {
  SymShape result;
  size_t result_owner = indices.front();
  for (size_t index : indices) {
    const SymShape& shape = args.input(index).shape;
    if (shape.size() > result.size())
      result.insert(result.begin(), shape.size() - result.size(), SymInt(1));
    size_t lead = result.size() - shape.size();
    for (size_t i = 0; i < shape.size(); ++i) {
      SymInt& current = result[lead + i];
      const SymInt& size = shape[i];
      if (size.is_constant() && size.constant() == 1) continue;
      if (current.is_constant() && current.constant() == 1) {
        current = size;
        continue;
      }
      if (!sizes_equal(current, size, "broadcasting")) {
        throw Error(fmt::format(
            "{}: cannot broadcast argument '{}' ({}) with argument '{}' ({}): "
            "sizes {} and {} differ and neither is 1",
            args.op.name, args.input_name(result_owner), args.input(result_owner).str(),
            args.input_name(index), args.input(index).str(), current.str(), size.str()));
      }
    }
    result_owner = index;
  }
  return result;
}

int64_t wrap_dim_for(const MetaArgs& args, int64_t dim, int64_t rank) {
  int64_t wrapped = dim < 0 ? dim + rank : dim;
  TESSERA_REQUIRE(wrapped >= 0 && wrapped < std::max<int64_t>(rank, 1),
                  "{}: dim {} is out of range for argument '{}' ({}) of rank {}", args.op.name, dim,
                  args.input_name(0), args.input(0).str(), rank);
  return wrapped;
}

std::function<void(std::span<const TensorMeta>, Attributes&)> wrap_dim_attributes(
    std::vector<std::string> names) {
  return [names](std::span<const TensorMeta> inputs, Attributes& attributes) {
    if (inputs.empty()) return;
    int64_t rank = inputs[0].rank();
    for (const std::string& name : names) {
      int64_t dim = attributes.get_int(name);
      if (dim < 0 && dim >= -rank) attributes.set(name, dim + rank);  // out of range: meta says so
    }
  };
}

SymShape infer_view_shape(const MetaArgs& args, const SymShape& shape,
                          const std::vector<int64_t>& sizes) {
  SymShape result;
  SymInt known = 1;
  int inferred = -1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1) {
      TESSERA_REQUIRE(inferred < 0, "{}: only one size of {} may be -1", args.op.name,
                      shape_str(sizes));
      inferred = static_cast<int>(i);
      result.push_back(SymInt(-1));
    } else {
      TESSERA_REQUIRE(sizes[i] >= 0, "{}: sizes in {} must be >= 0 or -1", args.op.name,
                      shape_str(sizes));
      result.push_back(SymInt(sizes[i]));
      known = known * SymInt(sizes[i]);
    }
  }
  SymInt numel = sym_numel(shape);
  if (inferred >= 0) {
    TESSERA_REQUIRE(!(known.is_constant() && known.constant() == 0),
                    "{}: cannot infer the -1 in {} next to a size of 0", args.op.name,
                    shape_str(sizes));
    result[inferred] = floordiv(numel, known);
    known = known * result[inferred];
  }
  if (!sizes_equal(known, numel, "reshape element count")) {
    throw Error(fmt::format("{}: shape {} is invalid for argument '{}' ({}) with {} elements",
                            args.op.name, shape_str(sizes), args.input_name(0), args.input(0).str(),
                            numel.str()));
  }
  return result;
}

}  // namespace tessera
