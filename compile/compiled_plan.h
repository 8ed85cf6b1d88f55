// What the compile passes produce from a traced graph: an ordered list of steps over its nodes
// (views, copies, library kernels such as GEMMs, fused row kernels, and the splitting ops between
// the pieces), the fused kernels, and the memory plan. PiecewiseBackend runs it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compile/compilation_config.h"
#include "compile/ir/graph.h"

namespace tessera {

class LoadedKernel;  // compile/codegen/codegen_target.h

// A connected run of fusible nodes compiled into one generated kernel: one row of `rows` per
// program instance, intermediates in registers, only `outputs` written to memory.
struct FusedKernel {
  std::string name;          // "fused_3_rms_norm"
  std::vector<int> nodes;    // graph node indices, in order
  std::vector<int> inputs;   // value ids read from memory (graph inputs, constants, step outputs)
  std::vector<int> outputs;  // value ids written to memory
  SymInt rows;               // dim 0 shared by every output
  std::string source;        // generated source (target language)
  std::shared_ptr<const LoadedKernel> compiled;  // loaded by the device's codegen target
};

// view: an alias of its input (no work); copy: a view materialized into its own buffer, where a
// reader needs contiguous memory (compile/passes/materialize.cpp); library: an op's own kernel;
// fused: a generated kernel; splitting: an op run between pieces.
enum class StepKind { view, copy, library, fused, splitting };
const char* step_kind_name(StepKind kind);  // "view", "copy", ...

struct Step {
  StepKind kind = StepKind::library;
  int node = -1;    // view/library/splitting: the graph node
  int kernel = -1;  // fused: index into CompiledPlan::kernels
  int piece = 0;    // which piece (splitting steps sit between pieces)
  // library: a constant weight that the next GEMM step reads, for this step's kernel to start
  // pulling into the device's cache as it ends (compile/passes/weight_prefetch.cpp); -1: none.
  int prefetch = -1;
  // Its kernel runs right after a splitting op's (compile/passes/follows_splitting.cpp): a hint
  // for how a GEMM times its paths.
  bool follows_splitting_op = false;
};

// Where each materialized value (and each graph input: its static slot) lives in the arena:
// offsets planned at the largest sizes, reused by values whose lifetimes do not overlap.
struct MemoryPlan {
  struct Slot {
    size_t offset = 0;
    size_t max_bytes = 0;
  };
  std::map<int, Slot> slots;  // by value id
  size_t arena_bytes = 0;
  size_t unplanned_bytes = 0;  // the sum of all slots: what no reuse would have taken
};

struct PassTiming {
  std::string pass;
  double milliseconds = 0;
};

struct CompiledPlan {
  Graph graph;
  std::vector<Step> steps;
  std::vector<FusedKernel> kernels;
  MemoryPlan memory;
  Bindings max_sizes;  // the largest value of each symbol the plan is sized for
  Device device;       // where its inputs live and its kernels run
  int num_pieces = 0;
  std::vector<PassTiming> timings;
  size_t kernels_compiled = 0;       // sources compiled in this process by this plan
  size_t kernels_from_cache = 0;     // loaded from the on-disk cache or shared with a twin piece
  std::string explain() const;       // pieces, splitting ops, ops and fused kernels per piece
  size_t launches_per_call() const;  // steps that launch device work (all but views)
};

}  // namespace tessera
