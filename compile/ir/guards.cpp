#include "compile/ir/guards.h"

#include <filesystem>

#include "runtime/check.h"

namespace tessera {

std::string Guard::str() const {
  return fmt::format("{}  ({}{}{})", condition.str(), why, where.empty() ? "" : " at ", where);
}

SymInt ShapeEnv::create_symbol(int64_t hint) {
  std::string name = fmt::format("s{}", hints_.size());
  hints_[name] = hint;
  return SymInt::symbol(name);
}

namespace {

std::string location_text(const std::source_location& where) {
  if (where.line() == 0) return "";
  // Keep the path from the project's top folder on (models/llama.cpp), not the build machine's.
  std::string path = where.file_name();
  for (const char* top : {"/models/", "/engine/", "/compile/", "/kernels/", "/tests/", "/bench/"}) {
    auto at = path.rfind(top);
    if (at != std::string::npos) {
      path = path.substr(at + 1);
      break;
    }
  }
  return fmt::format("{}:{}", path, where.line());
}

}  // namespace

void ShapeEnv::add_guard(SymBool condition, const char* why, const std::source_location& where) {
  std::string reason = why ? why : "a decision on a symbolic size";
  if (!current_op_.empty()) reason += " in op " + current_op_;
  std::string text = condition.str();
  for (const Guard& guard : guards_)
    if (guard.condition.str() == text) return;
  guards_.push_back(Guard{std::move(condition), location_text(where), std::move(reason)});
}

int64_t ShapeEnv::decide_int(const SymInt& value, const char* why,
                             const std::source_location& where) {
  int64_t concrete = value.evaluate(hints_);
  add_guard(SymBool(value, SymCompare::eq, SymInt(concrete), where), why, where);
  return concrete;
}

bool ShapeEnv::decide_bool(const SymBool& value, const char* why) {
  bool result = value.evaluate(hints_);
  add_guard(result ? value : negate(value), why, value.where());
  return result;
}

ShapeEnvScope::ShapeEnvScope(ShapeEnv& env) : previous_(current_symbolic_decider()) {
  set_current_symbolic_decider(&env);
}

ShapeEnvScope::~ShapeEnvScope() {
  set_current_symbolic_decider(previous_);
}

SymBool negate(const SymBool& condition) {
  SymCompare opposite = SymCompare::eq;
  switch (condition.op()) {
    case SymCompare::eq:
      opposite = SymCompare::ne;
      break;
    case SymCompare::ne:
      opposite = SymCompare::eq;
      break;
    case SymCompare::lt:
      opposite = SymCompare::ge;
      break;
    case SymCompare::le:
      opposite = SymCompare::gt;
      break;
    case SymCompare::gt:
      opposite = SymCompare::le;
      break;
    case SymCompare::ge:
      opposite = SymCompare::lt;
      break;
  }
  return SymBool(condition.lhs(), opposite, condition.rhs(), condition.where());
}

const Guard* first_failing_guard(const std::vector<Guard>& guards, const Bindings& bindings) {
  for (const Guard& guard : guards)
    if (!guard.condition.evaluate(bindings)) return &guard;
  return nullptr;
}

}  // namespace tessera
