// Symbolic integers for shapes: expressions over named symbols (the token count "s0", ...) and
// integer constants. Expressions are kept in a canonical form (a sum of integer-weighted products
// of atoms, where an atom is a symbol or an irreducible floordiv/mod/min/max), so two equal
// expressions built different ways compare and hash equal.
//
// Turning a symbolic value into a concrete int or bool during tracing *specializes*: the answer is
// recorded as a guard through the active ShapeEnv (compile/ir/guards.h). Without an active ShapeEnv
// only constant expressions can be made concrete.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <source_location>
#include <string>
#include <type_traits>
#include <vector>

namespace tessera {

struct SymExpr;
using Bindings = std::map<std::string, int64_t>;

class SymInt {
 public:
  SymInt(int64_t value = 0);  // NOLINT: constants convert implicitly
  static SymInt symbol(const std::string& name);

  bool is_constant() const;
  // The constant's value; throws when symbolic (use guard_int while tracing).
  int64_t constant() const;
  std::vector<std::string> symbols() const;
  int64_t evaluate(const Bindings& bindings) const;  // throws naming an unbound symbol
  std::string str() const;
  size_t hash() const;

  // Concrete value: a constant's, or, while tracing, the hint's, recorded as a guard.
  int64_t guard_int(const char* why = nullptr,
                    const std::source_location& where = std::source_location::current()) const;

  friend SymInt operator+(const SymInt& a, const SymInt& b);
  friend SymInt operator-(const SymInt& a, const SymInt& b);
  friend SymInt operator*(const SymInt& a, const SymInt& b);
  friend SymInt floordiv(const SymInt& a, const SymInt& b);
  friend SymInt mod(const SymInt& a, const SymInt& b);
  friend SymInt sym_min(const SymInt& a, const SymInt& b);
  friend SymInt sym_max(const SymInt& a, const SymInt& b);
  SymInt operator-() const { return SymInt(0) - *this; }
  SymInt& operator+=(const SymInt& other) { return *this = *this + other; }
  SymInt& operator*=(const SymInt& other) { return *this = *this * other; }

  // Structural equality of canonical forms (no guard).
  bool same_as(const SymInt& other) const;
  const std::shared_ptr<const SymExpr>& expr() const { return expr_; }

 private:
  explicit SymInt(std::shared_ptr<const SymExpr> expr) : expr_(std::move(expr)) {}
  std::shared_ptr<const SymExpr> expr_;  // null for a constant fast path
  int64_t constant_ = 0;
  friend struct SymExprBuilder;
};

enum class SymCompare { eq, ne, lt, le, gt, ge };

// A SymInt with the source location of the expression that produced it: the right-hand side of a
// comparison converts to this at the caller, so a guard can name the model code that compared.
struct SymIntAt {
  template <typename T>
  requires std::is_convertible_v<const T&, SymInt> SymIntAt(
      const T& value,  // NOLINT: implicit on purpose
      const std::source_location& where = std::source_location::current())
      : value(value), where(where) {}
  SymInt value;
  std::source_location where;
};

// A comparison of two SymInts. Converting it to bool decides it: statically when it can (both
// constant, or equal canonical forms), else through the active ShapeEnv, which records a guard.
class SymBool {
 public:
  SymBool(SymInt lhs, SymCompare op, SymInt rhs,
          std::source_location where = std::source_location::current())
      : lhs_(std::move(lhs)), op_(op), rhs_(std::move(rhs)), where_(where) {}
  explicit SymBool(bool value) : lhs_(value ? 1 : 0), op_(SymCompare::eq), rhs_(1) {}
  // Decided without a guard, if possible: true/false; else nullopt-like -1.
  int static_value() const;
  bool evaluate(const Bindings& bindings) const;
  bool guard_bool(const char* why = nullptr) const;
  explicit operator bool() const { return guard_bool(); }
  std::string str() const;
  const SymInt& lhs() const { return lhs_; }
  const SymInt& rhs() const { return rhs_; }
  SymCompare op() const { return op_; }
  const std::source_location& where() const { return where_; }

 private:
  SymInt lhs_;
  SymCompare op_;
  SymInt rhs_;
  std::source_location where_;
};

// == and != take SymIntAt on both sides: with the same parameter types, C++20's reversed
// candidate ties with the written one instead of competing with it.
SymBool operator==(const SymIntAt& a, const SymIntAt& b);
SymBool operator!=(const SymIntAt& a, const SymIntAt& b);
SymBool operator<(const SymInt& a, const SymIntAt& b);
SymBool operator<=(const SymInt& a, const SymIntAt& b);
SymBool operator>(const SymInt& a, const SymIntAt& b);
SymBool operator>=(const SymInt& a, const SymIntAt& b);

using SymShape = std::vector<SymInt>;
std::string sym_shape_str(const SymShape& shape);  // "[s0, 64]"
SymShape to_sym_shape(const std::vector<int64_t>& sizes);
SymInt sym_numel(const SymShape& shape);

// Hooks for guard recording, installed by compile/guards while tracing. nullptr outside.
class SymbolicDecider {
 public:
  virtual ~SymbolicDecider() = default;
  virtual int64_t decide_int(const SymInt& value, const char* why,
                             const std::source_location& where) = 0;
  virtual bool decide_bool(const SymBool& value, const char* why) = 0;
};
SymbolicDecider* current_symbolic_decider();
void set_current_symbolic_decider(SymbolicDecider* decider);

}  // namespace tessera
