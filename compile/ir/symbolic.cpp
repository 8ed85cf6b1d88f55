#include "compile/ir/symbolic.h"

#include <algorithm>
#include <functional>

#include "runtime/check.h"

namespace tessera {

// An atom is a symbol or an irreducible operation over canonical expressions. Its canonical
// string is its identity: equal strings mean equal atoms.
struct SymAtom {
  enum class Kind { symbol, floordiv, mod, min, max } kind;
  std::string name;  // symbol name, or the canonical string for operations
  SymInt a, b;
};

struct SymExpr {
  // value = constant + sum over terms of coefficient * product(atoms); a term's key is its sorted
  // list of atom strings (with repeats), so a canonical form compares by its printed string.
  struct Term {
    std::vector<std::shared_ptr<const SymAtom>> atoms;  // sorted by name
    int64_t coefficient = 0;
  };
  std::map<std::vector<std::string>, Term> terms;
  int64_t constant = 0;
  std::string text;  // canonical print, computed once
};

namespace {

int64_t floor_div(int64_t a, int64_t b) {
  TESSERA_REQUIRE(b != 0, "symbolic shape arithmetic: division by zero");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t floor_mod(int64_t a, int64_t b) {
  return a - floor_div(a, b) * b;
}

std::string term_text(const SymExpr::Term& term) {
  std::string atoms;
  for (const auto& atom : term.atoms) {
    if (!atoms.empty()) atoms += "*";
    atoms += atom->kind == SymAtom::Kind::symbol ? atom->name : atom->name;
  }
  if (term.coefficient == 1) return atoms;
  if (term.coefficient == -1) return "-" + atoms;
  return fmt::format("{}*{}", term.coefficient, atoms);
}

}  // namespace

struct SymExprBuilder {
  static SymInt make(SymExpr expr) {
    for (auto it = expr.terms.begin(); it != expr.terms.end();) {
      if (it->second.coefficient == 0)
        it = expr.terms.erase(it);
      else
        ++it;
    }
    if (expr.terms.empty()) return SymInt(expr.constant);
    std::string text;
    for (const auto& [key, term] : expr.terms) {
      std::string piece = term_text(term);
      if (text.empty())
        text = piece;
      else if (piece[0] == '-')
        text += " - " + piece.substr(1);
      else
        text += " + " + piece;
    }
    if (expr.constant > 0) text += fmt::format(" + {}", expr.constant);
    if (expr.constant < 0) text += fmt::format(" - {}", -expr.constant);
    expr.text = std::move(text);
    return SymInt(std::make_shared<const SymExpr>(std::move(expr)));
  }

  static SymExpr expand(const SymInt& value) {
    if (value.expr_) return *value.expr_;
    SymExpr expr;
    expr.constant = value.constant_;
    return expr;
  }

  static SymInt atom(std::shared_ptr<const SymAtom> atom) {
    SymExpr expr;
    SymExpr::Term term;
    term.atoms.push_back(atom);
    term.coefficient = 1;
    expr.terms.emplace(std::vector<std::string>{atom->name}, std::move(term));
    return make(std::move(expr));
  }

  static SymInt operation(SymAtom::Kind kind, const SymInt& a, const SymInt& b) {
    auto atom = std::make_shared<SymAtom>();
    atom->kind = kind;
    atom->a = a;
    atom->b = b;
    switch (kind) {
      case SymAtom::Kind::floordiv:
        atom->name = fmt::format("({})//{}", a.str(), wrap(b));
        break;
      case SymAtom::Kind::mod:
        atom->name = fmt::format("({})%{}", a.str(), wrap(b));
        break;
      case SymAtom::Kind::min:
        atom->name = fmt::format("min({}, {})", a.str(), b.str());
        break;
      case SymAtom::Kind::max:
        atom->name = fmt::format("max({}, {})", a.str(), b.str());
        break;
      case SymAtom::Kind::symbol:
        break;
    }
    return SymExprBuilder::atom(atom);
  }

  static std::string wrap(const SymInt& value) {
    return value.is_constant() ? value.str() : "(" + value.str() + ")";
  }
};

SymInt::SymInt(int64_t value) : constant_(value) {}

SymInt SymInt::symbol(const std::string& name) {
  auto atom = std::make_shared<SymAtom>();
  atom->kind = SymAtom::Kind::symbol;
  atom->name = name;
  return SymExprBuilder::atom(atom);
}

bool SymInt::is_constant() const {
  return expr_ == nullptr;
}

int64_t SymInt::constant() const {
  TESSERA_REQUIRE(is_constant(), "symbolic size {} has no constant value here", str());
  return constant_;
}

std::vector<std::string> SymInt::symbols() const {
  std::vector<std::string> names;
  std::function<void(const SymInt&)> collect = [&](const SymInt& value) {
    if (!value.expr_) return;
    for (const auto& [key, term] : value.expr_->terms) {
      for (const auto& atom : term.atoms) {
        if (atom->kind == SymAtom::Kind::symbol) {
          names.push_back(atom->name);
        } else {
          collect(atom->a);
          collect(atom->b);
        }
      }
    }
  };
  collect(*this);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

int64_t SymInt::evaluate(const Bindings& bindings) const {
  if (!expr_) return constant_;
  int64_t total = expr_->constant;
  for (const auto& [key, term] : expr_->terms) {
    int64_t product = term.coefficient;
    for (const auto& atom : term.atoms) {
      switch (atom->kind) {
        case SymAtom::Kind::symbol: {
          auto it = bindings.find(atom->name);
          TESSERA_REQUIRE(it != bindings.end(), "symbol {} has no value bound", atom->name);
          product *= it->second;
          break;
        }
        case SymAtom::Kind::floordiv:
          product *= floor_div(atom->a.evaluate(bindings), atom->b.evaluate(bindings));
          break;
        case SymAtom::Kind::mod:
          product *= floor_mod(atom->a.evaluate(bindings), atom->b.evaluate(bindings));
          break;
        case SymAtom::Kind::min:
          product *= std::min(atom->a.evaluate(bindings), atom->b.evaluate(bindings));
          break;
        case SymAtom::Kind::max:
          product *= std::max(atom->a.evaluate(bindings), atom->b.evaluate(bindings));
          break;
      }
    }
    total += product;
  }
  return total;
}

std::string SymInt::str() const {
  return expr_ ? expr_->text : std::to_string(constant_);
}
size_t SymInt::hash() const {
  return std::hash<std::string>()(str());
}

bool SymInt::same_as(const SymInt& other) const {
  if (!expr_ && !other.expr_) return constant_ == other.constant_;
  if (!expr_ || !other.expr_) return false;
  return expr_ == other.expr_ || expr_->text == other.expr_->text;
}

int64_t SymInt::guard_int(const char* why, const std::source_location& where) const {
  if (is_constant()) return constant_;
  SymbolicDecider* decider = current_symbolic_decider();
  TESSERA_REQUIRE(decider != nullptr, "symbolic size {} was made concrete outside of tracing{}{}",
                  str(), why ? ": " : "", why ? why : "");
  return decider->decide_int(*this, why, where);
}

SymInt operator+(const SymInt& a, const SymInt& b) {
  if (a.is_constant() && b.is_constant()) return SymInt(a.constant_ + b.constant_);
  SymExpr sum = SymExprBuilder::expand(a);
  SymExpr other = SymExprBuilder::expand(b);
  sum.constant += other.constant;
  for (auto& [key, term] : other.terms) {
    auto [it, inserted] = sum.terms.emplace(key, term);
    if (!inserted) it->second.coefficient += term.coefficient;
  }
  return SymExprBuilder::make(std::move(sum));
}

SymInt operator-(const SymInt& a, const SymInt& b) {
  if (a.is_constant() && b.is_constant()) return SymInt(a.constant_ - b.constant_);
  return a + b * SymInt(-1);
}

SymInt operator*(const SymInt& a, const SymInt& b) {
  if (a.is_constant() && b.is_constant()) return SymInt(a.constant_ * b.constant_);
  SymExpr left = SymExprBuilder::expand(a);
  SymExpr right = SymExprBuilder::expand(b);
  SymExpr product;
  product.constant = left.constant * right.constant;
  auto add_term = [&](SymExpr::Term term) {
    std::sort(term.atoms.begin(), term.atoms.end(),
              [](const auto& x, const auto& y) { return x->name < y->name; });
    std::vector<std::string> key;
    for (const auto& atom : term.atoms) key.push_back(atom->name);
    auto [it, inserted] = product.terms.emplace(key, term);
    if (!inserted) it->second.coefficient += term.coefficient;
  };
  for (const auto& [key, term] : left.terms) {
    if (right.constant != 0) add_term({term.atoms, term.coefficient * right.constant});
    for (const auto& [other_key, other] : right.terms) {
      SymExpr::Term combined{term.atoms, term.coefficient * other.coefficient};
      combined.atoms.insert(combined.atoms.end(), other.atoms.begin(), other.atoms.end());
      add_term(std::move(combined));
    }
  }
  if (left.constant != 0)
    for (const auto& [key, term] : right.terms)
      add_term({term.atoms, term.coefficient * left.constant});
  return SymExprBuilder::make(std::move(product));
}

namespace {

// True when every coefficient and the constant of `value` are divisible by `divisor`.
bool divisible_by(const SymInt& value, int64_t divisor) {
  SymExpr expr = SymExprBuilder::expand(value);
  if (expr.constant % divisor != 0) return false;
  for (const auto& [key, term] : expr.terms)
    if (term.coefficient % divisor != 0) return false;
  return true;
}

SymInt divide_exactly(const SymInt& value, int64_t divisor) {
  SymExpr expr = SymExprBuilder::expand(value);
  expr.constant /= divisor;
  for (auto& [key, term] : expr.terms) term.coefficient /= divisor;
  return SymExprBuilder::make(std::move(expr));
}

}  // namespace

namespace {

// Bounds of an expression from the one fact we assume of every symbol: it is a size, so >= 0.
// A sum of symbol products with coefficients all >= 0 is at least its constant (all <= 0: at
// most). Returns {has_lower, lower, has_upper, upper}.
struct SymBounds {
  bool has_lower = false;
  int64_t lower = 0;
  bool has_upper = false;
  int64_t upper = 0;
};

SymBounds bounds_of(const SymInt& value) {
  SymExpr expr = SymExprBuilder::expand(value);
  bool all_symbols = true, all_nonnegative = true, all_nonpositive = true;
  for (const auto& [key, term] : expr.terms) {
    for (const auto& atom : term.atoms)
      all_symbols = all_symbols && atom->kind == SymAtom::Kind::symbol;
    all_nonnegative = all_nonnegative && term.coefficient >= 0;
    all_nonpositive = all_nonpositive && term.coefficient <= 0;
  }
  SymBounds bounds;
  bounds.has_lower = all_symbols && all_nonnegative;
  bounds.has_upper = all_symbols && all_nonpositive;
  bounds.lower = bounds.upper = expr.constant;
  return bounds;
}

}  // namespace

SymInt floordiv(const SymInt& a, const SymInt& b) {
  if (a.is_constant() && b.is_constant()) return SymInt(floor_div(a.constant_, b.constant_));
  if (b.is_constant()) {
    TESSERA_REQUIRE(b.constant_ != 0, "symbolic shape arithmetic: {} // 0", a.str());
    if (b.constant_ == 1) return a;
    if (divisible_by(a, b.constant_)) return divide_exactly(a, b.constant_);
  }
  if (a.same_as(b)) return SymInt(1);
  return SymExprBuilder::operation(SymAtom::Kind::floordiv, a, b);
}

SymInt mod(const SymInt& a, const SymInt& b) {
  if (a.is_constant() && b.is_constant()) return SymInt(floor_mod(a.constant_, b.constant_));
  if (b.is_constant()) {
    TESSERA_REQUIRE(b.constant_ != 0, "symbolic shape arithmetic: {} % 0", a.str());
    if (b.constant_ == 1 || divisible_by(a, b.constant_)) return SymInt(0);
  }
  if (a.same_as(b)) return SymInt(0);
  return SymExprBuilder::operation(SymAtom::Kind::mod, a, b);
}

SymInt sym_min(const SymInt& a, const SymInt& b) {
  if (a.is_constant() && b.is_constant()) return SymInt(std::min(a.constant_, b.constant_));
  SymBounds difference = bounds_of(a - b);
  if (difference.has_upper && difference.upper <= 0) return a;
  if (difference.has_lower && difference.lower >= 0) return b;
  return a.str() < b.str() ? SymExprBuilder::operation(SymAtom::Kind::min, a, b)
                           : SymExprBuilder::operation(SymAtom::Kind::min, b, a);
}

SymInt sym_max(const SymInt& a, const SymInt& b) {
  if (a.is_constant() && b.is_constant()) return SymInt(std::max(a.constant_, b.constant_));
  SymBounds difference = bounds_of(a - b);
  if (difference.has_lower && difference.lower >= 0) return a;
  if (difference.has_upper && difference.upper <= 0) return b;
  return a.str() < b.str() ? SymExprBuilder::operation(SymAtom::Kind::max, a, b)
                           : SymExprBuilder::operation(SymAtom::Kind::max, b, a);
}

namespace {

bool compare(int64_t difference, SymCompare op) {
  switch (op) {
    case SymCompare::eq:
      return difference == 0;
    case SymCompare::ne:
      return difference != 0;
    case SymCompare::lt:
      return difference < 0;
    case SymCompare::le:
      return difference <= 0;
    case SymCompare::gt:
      return difference > 0;
    case SymCompare::ge:
      return difference >= 0;
  }
  return false;
}

const char* compare_text(SymCompare op) {
  switch (op) {
    case SymCompare::eq:
      return "==";
    case SymCompare::ne:
      return "!=";
    case SymCompare::lt:
      return "<";
    case SymCompare::le:
      return "<=";
    case SymCompare::gt:
      return ">";
    case SymCompare::ge:
      return ">=";
  }
  return "?";
}

}  // namespace

int SymBool::static_value() const {
  SymInt difference = lhs_ - rhs_;
  if (difference.is_constant()) return compare(difference.constant(), op_) ? 1 : 0;
  // Decide from bounds when every value in them gives the same answer.
  SymBounds bounds = bounds_of(difference);
  bool at_least_zero = bounds.has_lower && bounds.lower >= 0;
  bool above_zero = bounds.has_lower && bounds.lower > 0;
  bool at_most_zero = bounds.has_upper && bounds.upper <= 0;
  bool below_zero = bounds.has_upper && bounds.upper < 0;
  switch (op_) {
    case SymCompare::eq:
      return (above_zero || below_zero) ? 0 : -1;
    case SymCompare::ne:
      return (above_zero || below_zero) ? 1 : -1;
    case SymCompare::lt:
      return below_zero ? 1 : at_least_zero ? 0 : -1;
    case SymCompare::le:
      return at_most_zero ? 1 : above_zero ? 0 : -1;
    case SymCompare::gt:
      return above_zero ? 1 : at_most_zero ? 0 : -1;
    case SymCompare::ge:
      return at_least_zero ? 1 : below_zero ? 0 : -1;
  }
  return -1;
}

bool SymBool::evaluate(const Bindings& bindings) const {
  return compare(lhs_.evaluate(bindings) - rhs_.evaluate(bindings), op_);
}

bool SymBool::guard_bool(const char* why) const {
  int known = static_value();
  if (known >= 0) return known == 1;
  SymbolicDecider* decider = current_symbolic_decider();
  TESSERA_REQUIRE(decider != nullptr, "symbolic condition {} was decided outside of tracing{}{}",
                  str(), why ? ": " : "", why ? why : "");
  return decider->decide_bool(*this, why);
}

std::string SymBool::str() const {
  return fmt::format("{} {} {}", lhs_.str(), compare_text(op_), rhs_.str());
}

SymBool operator==(const SymIntAt& a, const SymIntAt& b) {
  return SymBool(a.value, SymCompare::eq, b.value, b.where);
}
SymBool operator!=(const SymIntAt& a, const SymIntAt& b) {
  return SymBool(a.value, SymCompare::ne, b.value, b.where);
}
SymBool operator<(const SymInt& a, const SymIntAt& b) {
  return SymBool(a, SymCompare::lt, b.value, b.where);
}
SymBool operator<=(const SymInt& a, const SymIntAt& b) {
  return SymBool(a, SymCompare::le, b.value, b.where);
}
SymBool operator>(const SymInt& a, const SymIntAt& b) {
  return SymBool(a, SymCompare::gt, b.value, b.where);
}
SymBool operator>=(const SymInt& a, const SymIntAt& b) {
  return SymBool(a, SymCompare::ge, b.value, b.where);
}

std::string sym_shape_str(const SymShape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + shape[i].str();
  return out + "]";
}

SymShape to_sym_shape(const std::vector<int64_t>& sizes) {
  return SymShape(sizes.begin(), sizes.end());
}

SymInt sym_numel(const SymShape& shape) {
  SymInt n = 1;
  for (const SymInt& s : shape) n = n * s;
  return n;
}

namespace {
thread_local SymbolicDecider* active_decider = nullptr;
}

SymbolicDecider* current_symbolic_decider() {
  return active_decider;
}
void set_current_symbolic_decider(SymbolicDecider* decider) {
  active_decider = decider;
}

}  // namespace tessera
