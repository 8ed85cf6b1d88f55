#include "kernels/pointwise_table.h"

#include <algorithm>

#include "runtime/check.h"

namespace tessera {
namespace {

std::vector<std::string> split_choices(const char* choices) {
  std::vector<std::string> parts;
  std::string rest = choices;
  for (size_t bar; (bar = rest.find('|')) != std::string::npos; rest.erase(0, bar + 1))
    parts.push_back(rest.substr(0, bar));
  parts.push_back(rest);
  return parts;
}

// "'none' or 'tanh'", "'a', 'b' or 'c'".
std::string choices_text(const std::vector<std::string>& choices) {
  std::string text;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) text += i + 1 == choices.size() ? " or " : ", ";
    text += "'" + choices[i] + "'";
  }
  return text;
}

template <typename Formula>
PointwiseFormula runtime_formula() {
  PointwiseFormula formula;
  formula.name = Formula::kName;
  formula.function = std::string("tsr_") + Formula::kName;
  formula.input_names.assign(Formula::kInputNames.begin(), Formula::kInputNames.end());
  formula.integers = Formula::kIntegers;
  formula.parameters.assign(Formula::kParameters.begin(), Formula::kParameters.end());
  formula.doc = Formula::kDoc;
  return formula;
}

}  // namespace

std::span<const PointwiseFormula> pointwise_formulas() {
  static const std::vector<PointwiseFormula> formulas = [] {
    std::vector<PointwiseFormula> all;
#define TESSERA_POINTWISE_RUNTIME_FORMULA(name, ...) \
  all.push_back(runtime_formula<pointwise::name>());
    TESSERA_POINTWISE_OPS(TESSERA_POINTWISE_RUNTIME_FORMULA)
#undef TESSERA_POINTWISE_RUNTIME_FORMULA
    return all;
  }();
  return formulas;
}

float pointwise_parameter_value(const char* op, const PointwiseParameter& parameter,
                                const Attributes& attributes) {
  if (parameter.choices == nullptr)
    return static_cast<float>(attributes.get_float(parameter.attribute));
  const std::vector<std::string> choices = split_choices(parameter.choices);
  const std::string value = attributes.get_string(parameter.attribute, choices.front());
  auto it = std::find(choices.begin(), choices.end(), value);
  TESSERA_REQUIRE(it != choices.end(), "{}: {}='{}' is not valid; use {}", op, parameter.attribute,
                  value, choices_text(choices));
  return static_cast<float>(it - choices.begin());
}

}  // namespace tessera
