// Guards: what a trace assumed about sizes. The ShapeEnv hands out symbols for dynamic sizes
// (with their trace-time values as hints) and, installed as the thread's SymbolicDecider while
// tracing, turns every decision on a symbolic size into a recorded guard.
#pragma once

#include <source_location>
#include <string>
#include <vector>

#include "compile/ir/symbolic.h"

namespace tessera {

struct Guard {
  SymBool condition;  // must hold for the trace to be valid
  std::string where;  // the code that asked: "models/llama.cpp:42"
  std::string why;    // what asked: "Tensor::size()", "broadcasting in add"
  std::string str() const;
};

class ShapeEnv : public SymbolicDecider {
 public:
  // A new symbol s0, s1, ... whose trace-time value is `hint`.
  SymInt create_symbol(int64_t hint);
  const Bindings& hints() const { return hints_; }
  const std::vector<Guard>& guards() const { return guards_; }
  // Names the op whose meta function is running, so guards it records say so.
  void set_current_op(const std::string& op_name) { current_op_ = op_name; }

  int64_t decide_int(const SymInt& value, const char* why,
                     const std::source_location& where) override;
  bool decide_bool(const SymBool& value, const char* why) override;

 private:
  void add_guard(SymBool condition, const char* why, const std::source_location& where);
  Bindings hints_;
  std::vector<Guard> guards_;
  std::string current_op_;
};

// Installs a ShapeEnv as the thread's decider for a scope.
class ShapeEnvScope {
 public:
  explicit ShapeEnvScope(ShapeEnv& env);
  ~ShapeEnvScope();
  ShapeEnvScope(const ShapeEnvScope&) = delete;
  ShapeEnvScope& operator=(const ShapeEnvScope&) = delete;

 private:
  SymbolicDecider* previous_;
};

SymBool negate(const SymBool& condition);
// The first guard that fails under `bindings`, or nullptr when all hold.
const Guard* first_failing_guard(const std::vector<Guard>& guards, const Bindings& bindings);

}  // namespace tessera
