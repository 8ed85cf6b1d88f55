#include "engine/structured_output/json_schema_grammar.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <set>

#include "engine/structured_output/code_point_set.h"
#include "engine/structured_output/number_grammar.h"
#include "engine/structured_output/regex_grammar.h"
#include "runtime/check.h"

namespace tessera {
namespace {

using Json = nlohmann::ordered_json;

const std::set<std::string, std::less<>> kAnnotations = {
    "title",    "description", "default",  "examples",  "$schema", "$id",
    "$comment", "deprecated",  "readOnly", "writeOnly", "$defs",   "definitions"};
const std::set<std::string, std::less<>> kStringKeywords = {"minLength", "maxLength", "pattern",
                                                            "format"};
const std::set<std::string, std::less<>> kNumberKeywords = {"minimum", "maximum",
                                                            "exclusiveMinimum", "exclusiveMaximum"};
const std::set<std::string, std::less<>> kObjectKeywords = {"properties", "required",
                                                            "additionalProperties"};
const std::set<std::string, std::less<>> kArrayKeywords = {"items", "prefixItems", "minItems",
                                                           "maxItems"};
const std::set<std::string, std::less<>> kCombinators = {"type",  "enum",  "const", "anyOf",
                                                         "oneOf", "allOf", "$ref"};

// String formats as regular expressions over the string's inside (RFC 3339 dates and times).
const std::map<std::string, std::string, std::less<>> kFormats = {
    {"date", R"([0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01]))"},
    {"time",
     R"(([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]))"},
    {"date-time",
     R"([0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]))"},
    {"uuid", R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"},
    {"email", R"([A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,})"},
    {"ipv4",
     R"(((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9]))"},
};

class SchemaCompiler {
 public:
  SchemaCompiler(const Json* root, std::string_view field) : root_(root), field_(field) {}

  Grammar compile() {
    const int32_t root = grammar_.add_rule("root");
    grammar_.add_alternative(root, {root_ ? value(*root_, "#") : any_object()});
    grammar_.set_root(root);
    grammar_.validate(field_);
    return std::move(grammar_);
  }

 private:
  [[noreturn]] void fail(const std::string& where, std::string_view what) const {
    throw Error(fmt::format("{}: {} (at schema location {})", field_, what, where));
  }

  // --- Shared rules, made once. ---
  GrammarElement whitespace() {
    if (!whitespace_) {
      ByteSet indent;
      indent.set(' ');
      indent.set('\t');
      GrammarSequence newline = grammar_.literal("\n");
      newline.push_back(grammar_.repeat(grammar_.byte_set(indent), 0, kMaxJsonIndent, field_));
      whitespace_ = grammar_.choice("ws", {{}, grammar_.literal(" "), std::move(newline)});
    }
    return *whitespace_;
  }
  GrammarElement string_character() {
    if (!string_character_) {
      CodePointSet plain;
      plain.add(0x20, '"' - 1);
      plain.add('"' + 1, '\\' - 1);
      plain.add('\\' + 1, kMaxCodePoint);
      std::vector<GrammarSequence> alternatives =
          plain.intersect(CodePointSet::all()).utf8_sequences(grammar_);
      ByteSet escapable;
      for (char c : std::string_view("\"\\/bfnrt")) escapable.set(static_cast<unsigned char>(c));
      alternatives.push_back({grammar_.literal("\\").front(), grammar_.byte_set(escapable)});
      ByteSet hex;
      for (char c : std::string_view("0123456789abcdefABCDEF"))
        hex.set(static_cast<unsigned char>(c));
      GrammarSequence unicode = grammar_.literal("\\u");
      for (int i = 0; i < 4; ++i) unicode.push_back(grammar_.byte_set(hex));
      alternatives.push_back(std::move(unicode));
      string_character_ = grammar_.choice("char", std::move(alternatives));
    }
    return *string_character_;
  }
  GrammarElement any_string() {
    if (!any_string_)
      any_string_ = quoted(grammar_.repeat(string_character(), 0, std::nullopt, field_));
    return *any_string_;
  }
  GrammarElement quoted(GrammarElement inside) {
    GrammarSequence sequence = grammar_.literal("\"");
    sequence.push_back(inside);
    grammar_.append_literal(sequence, "\"");
    return grammar_.choice("string", {std::move(sequence)});
  }
  GrammarElement any_value() {
    if (!any_value_) {
      const int32_t rule = grammar_.add_rule("value");
      any_value_ = grammar_.reference(rule);  // before its parts: they refer to it
      grammar_.add_alternative(rule, {any_object()});
      grammar_.add_alternative(rule, {any_array()});
      grammar_.add_alternative(rule, {any_string()});
      grammar_.add_alternative(rule, {number_grammar(grammar_, std::nullopt, std::nullopt)});
      for (std::string_view word : {"true", "false", "null"})
        grammar_.add_alternative(rule, grammar_.literal(word));
    }
    return *any_value_;
  }
  GrammarElement any_object() {
    if (!any_object_) {
      const int32_t rule = grammar_.add_rule("object");
      any_object_ = grammar_.reference(rule);
      GrammarSequence member{any_string(), whitespace()};
      grammar_.append_literal(member, ":");
      member.insert(member.end(), {whitespace(), any_value(), whitespace()});
      grammar_.add_alternative(
          rule, comma_list("{", grammar_.choice("member", {member}), 0, std::nullopt, "}"));
    }
    return *any_object_;
  }
  GrammarElement any_array() {
    if (!any_array_) {
      const int32_t rule = grammar_.add_rule("array");
      any_array_ = grammar_.reference(rule);
      GrammarElement item = grammar_.choice("item", {{any_value(), whitespace()}});
      grammar_.add_alternative(rule, comma_list("[", item, 0, std::nullopt, "]"));
    }
    return *any_array_;
  }
  // open ws (item ("," ws item){min-1,max-1})? close, where each item carries its trailing ws.
  GrammarSequence comma_list(std::string_view open, GrammarElement item, int64_t min,
                             std::optional<int64_t> max, std::string_view close) {
    GrammarSequence sequence = grammar_.literal(open);
    sequence.push_back(whitespace());
    if (!max || *max > 0) {
      GrammarSequence more = grammar_.literal(",");
      more.insert(more.end(), {whitespace(), item});
      const GrammarElement next = grammar_.choice("next", {std::move(more)});
      GrammarSequence items{
          item, grammar_.repeat(next, std::max<int64_t>(min - 1, 0),
                                max ? std::optional<int64_t>(*max - 1) : std::nullopt, field_)};
      if (min > 0)
        sequence.insert(sequence.end(), items.begin(), items.end());
      else
        sequence.push_back(grammar_.choice("items", {{}, std::move(items)}));
    }
    grammar_.append_literal(sequence, close);
    return sequence;
  }

  // --- Schemas. ---
  GrammarElement value(const Json& schema, const std::string& where) {
    // A chain of references can nest deeper than the JSON text does.
    if (depth_ >= kMaxDepth)
      fail(where, fmt::format("the schema nests deeper than {} levels (through $ref)", kMaxDepth));
    ++depth_;
    GrammarElement element = value_at_depth(schema, where);
    --depth_;
    return element;
  }

  GrammarElement value_at_depth(const Json& schema, const std::string& where) {
    if (schema.is_boolean())
      return schema.get<bool>() ? any_value() : grammar_.choice("nothing", {});
    if (!schema.is_object()) fail(where, "a schema must be an object or a boolean");
    for (const auto& [key, unused] : schema.items()) {
      if (kAnnotations.count(key) || kCombinators.count(key) || kStringKeywords.count(key) ||
          kNumberKeywords.count(key) || kObjectKeywords.count(key) || kArrayKeywords.count(key))
        continue;
      fail(where, fmt::format("the keyword '{}' is not supported", key));
    }
    auto only_annotations_besides = [&](std::string_view keyword) {
      for (const auto& [key, unused] : schema.items())
        if (key != keyword && !kAnnotations.count(key))
          fail(where, fmt::format("'{}' together with '{}' is not supported", keyword, key));
    };
    if (schema.contains("$ref")) {
      only_annotations_besides("$ref");
      return reference(schema["$ref"], where);
    }
    for (std::string_view keyword : {"anyOf", "oneOf"}) {
      if (!schema.contains(keyword)) continue;
      only_annotations_besides(keyword);
      const Json& options = schema[std::string(keyword)];
      if (!options.is_array() || options.empty())
        fail(where, fmt::format("'{}' must be a non-empty array", keyword));
      std::vector<GrammarSequence> alternatives;
      for (size_t i = 0; i < options.size(); ++i)
        alternatives.push_back({value(options[i], fmt::format("{}/{}/{}", where, keyword, i))});
      return grammar_.choice("any-of", std::move(alternatives));
    }
    if (schema.contains("allOf")) {
      only_annotations_besides("allOf");
      const Json& parts = schema["allOf"];
      if (!parts.is_array() || parts.size() != 1)
        fail(where, "'allOf' is supported with exactly one schema");
      return value(parts[0], where + "/allOf/0");
    }
    if (schema.contains("const")) return literal_value(schema["const"]);
    std::vector<std::string> types;
    if (schema.contains("type")) {
      const Json& type = schema["type"];
      if (type.is_string()) {
        types.push_back(type.get<std::string>());
      } else if (type.is_array() && !type.empty()) {
        for (const Json& one : type) {
          if (!one.is_string()) fail(where, "'type' must be a string or an array of strings");
          types.push_back(one.get<std::string>());
        }
      } else {
        fail(where, "'type' must be a string or an array of strings");
      }
    }
    if (schema.contains("enum")) return enumeration(schema["enum"], types, where);
    if (types.empty()) {
      auto has_any = [&](const auto& keywords) {
        for (const auto& [key, unused] : schema.items())
          if (keywords.count(key)) return true;
        return false;
      };
      if (has_any(kObjectKeywords)) types.push_back("object");
      if (has_any(kArrayKeywords)) types.push_back("array");
      if (has_any(kStringKeywords)) types.push_back("string");
      if (has_any(kNumberKeywords)) types.push_back("number");
      if (types.empty()) return any_value();
    }
    std::vector<GrammarSequence> alternatives;
    for (const std::string& type : types) alternatives.push_back({typed(schema, type, where)});
    return alternatives.size() == 1 ? alternatives[0][0]
                                    : grammar_.choice("types", std::move(alternatives));
  }

  GrammarElement typed(const Json& schema, const std::string& type, const std::string& where) {
    if (type == "string") return string_value(schema, where);
    if (type == "integer") {
      auto [minimum, maximum] = bounds(schema, true, where);
      return integer_grammar(grammar_, minimum, maximum);
    }
    if (type == "number") {
      auto [minimum, maximum] = bounds(schema, false, where);
      return number_grammar(grammar_, minimum, maximum);
    }
    if (type == "boolean")
      return grammar_.choice("boolean", {grammar_.literal("true"), grammar_.literal("false")});
    if (type == "null") return grammar_.choice("null", {grammar_.literal("null")});
    if (type == "object") return object_value(schema, where);
    if (type == "array") return array_value(schema, where);
    fail(where, fmt::format("unknown type '{}' (string, integer, number, boolean, null, object, "
                            "array)",
                            type));
  }

  GrammarElement literal_value(const Json& value) {
    return grammar_.choice("const", {grammar_.literal(value.dump())});
  }

  static bool has_type(const Json& value, const std::string& type) {
    if (type == "string") return value.is_string();
    if (type == "integer")
      return value.is_number_integer() ||
             (value.is_number_float() && std::floor(value.get<double>()) == value.get<double>());
    if (type == "number") return value.is_number();
    if (type == "boolean") return value.is_boolean();
    if (type == "null") return value.is_null();
    if (type == "object") return value.is_object();
    if (type == "array") return value.is_array();
    return false;
  }

  GrammarElement enumeration(const Json& values, const std::vector<std::string>& types,
                             const std::string& where) {
    if (!values.is_array() || values.empty()) fail(where, "'enum' must be a non-empty array");
    std::vector<GrammarSequence> alternatives;
    for (const Json& value : values) {
      const bool typed_ok =
          types.empty() || std::any_of(types.begin(), types.end(), [&](const std::string& type) {
            return has_type(value, type);
          });
      if (typed_ok) alternatives.push_back(grammar_.literal(value.dump()));
    }
    if (alternatives.empty()) fail(where, "no 'enum' value has the schema's 'type'");
    return grammar_.choice("enum", std::move(alternatives));
  }

  GrammarElement reference(const Json& ref, const std::string& where) {
    if (!ref.is_string()) fail(where, "'$ref' must be a string");
    const std::string target = ref.get<std::string>();
    if (target.empty() || target[0] != '#')
      fail(where,
           fmt::format("'$ref' \"{}\": only references inside the schema (#/...) are supported",
                       target));
    if (auto found = ref_rules_.find(target); found != ref_rules_.end())
      return grammar_.reference(found->second);
    const Json* resolved = nullptr;
    try {
      resolved = &root_->at(Json::json_pointer(target.substr(1)));
    } catch (const std::exception&) {
      fail(where, fmt::format("'$ref' \"{}\" points to nothing in the schema", target));
    }
    const int32_t rule = grammar_.add_rule("ref");
    ref_rules_.emplace(target, rule);  // first: the schema may refer to itself
    grammar_.add_alternative(rule, {value(*resolved, target)});
    return grammar_.reference(rule);
  }

  std::pair<std::optional<NumberBound>, std::optional<NumberBound>> bounds(
      const Json& schema, bool integer, const std::string& where) {
    auto read = [&](std::string_view keyword, bool lower) -> std::optional<NumberBound> {
      std::optional<NumberBound> bound;
      for (const bool exclusive : {false, true}) {
        const std::string key =
            exclusive ? (lower ? "exclusiveMinimum" : "exclusiveMaximum") : std::string(keyword);
        if (!schema.contains(key)) continue;
        const Json& given = schema[key];
        if (given.is_boolean()) continue;  // draft 4's flag, read below
        if (!given.is_number()) fail(where, fmt::format("'{}' must be a number", key));
        const double number = given.get<double>();
        if (!(std::fabs(number) <= static_cast<double>(kMaxNumberBound)))
          fail(where, fmt::format("'{}' {} is beyond the supported magnitude {}", key, number,
                                  kMaxNumberBound));
        bool inclusive = !exclusive;
        // Draft 4: "exclusiveMinimum": true makes "minimum" exclusive.
        const std::string flag = lower ? "exclusiveMinimum" : "exclusiveMaximum";
        if (!exclusive && schema.contains(flag) && schema[flag].is_boolean())
          inclusive = !schema[flag].get<bool>();
        double whole = lower ? std::ceil(number) : std::floor(number);
        if (whole != number) {
          if (!integer)
            fail(where, fmt::format("'{}' {} on a number: only whole-number bounds are supported",
                                    key, number));
          inclusive = true;  // an integer above 2.5 is one of at least 3
        }
        const NumberBound candidate{static_cast<int64_t>(whole), inclusive};
        // Both given: keep the tighter one.
        if (!bound || (lower ? (candidate.value > bound->value ||
                                (candidate.value == bound->value && !candidate.inclusive))
                             : (candidate.value < bound->value ||
                                (candidate.value == bound->value && !candidate.inclusive))))
          bound = candidate;
      }
      return bound;
    };
    return {read("minimum", true), read("maximum", false)};
  }

  int64_t count(const Json& schema, std::string_view key, const std::string& where) {
    const Json& given = schema[std::string(key)];
    if (!given.is_number_unsigned() ||
        given.get<uint64_t>() > static_cast<uint64_t>(Grammar::kMaxRepetition))
      fail(where,
           fmt::format("'{}' must be a whole number from 0 to {}", key, Grammar::kMaxRepetition));
    return static_cast<int64_t>(given.get<uint64_t>());
  }

  GrammarElement string_value(const Json& schema, const std::string& where) {
    const bool lengths = schema.contains("minLength") || schema.contains("maxLength");
    if (schema.contains("format") || schema.contains("pattern")) {
      if (schema.contains("format") && schema.contains("pattern"))
        fail(where, "'format' together with 'pattern' is not supported");
      if (lengths)
        fail(where,
             "'minLength' or 'maxLength' together with 'pattern' or 'format' is not supported");
      std::string pattern;
      if (schema.contains("pattern")) {
        if (!schema["pattern"].is_string()) fail(where, "'pattern' must be a string");
        pattern = schema["pattern"].get<std::string>();
      } else {
        if (!schema["format"].is_string()) fail(where, "'format' must be a string");
        auto found = kFormats.find(schema["format"].get<std::string>());
        if (found == kFormats.end())
          fail(where, fmt::format("the string format '{}' is not supported (date, time, date-time, "
                                  "uuid, email, ipv4)",
                                  schema["format"].get<std::string>()));
        pattern = found->second;
      }
      return quoted(regex_element(grammar_, pattern, RegexText::json_string,
                                  fmt::format("{} (pattern at {})", field_, where)));
    }
    if (!lengths) return any_string();
    const int64_t min = schema.contains("minLength") ? count(schema, "minLength", where) : 0;
    std::optional<int64_t> max;
    if (schema.contains("maxLength")) max = count(schema, "maxLength", where);
    if (max && *max < min) fail(where, "'maxLength' is below 'minLength'");
    return quoted(grammar_.repeat(string_character(), min, max, field_));
  }

  GrammarElement object_value(const Json& schema, const std::string& where) {
    static const Json kNoProperties = Json::object();
    const Json& properties = schema.contains("properties") ? schema["properties"] : kNoProperties;
    if (!properties.is_object()) fail(where, "'properties' must be an object");
    std::set<std::string> required;
    if (schema.contains("required")) {
      if (!schema["required"].is_array()) fail(where, "'required' must be an array of names");
      for (const Json& name : schema["required"]) {
        if (!name.is_string()) fail(where, "'required' must be an array of names");
        if (!properties.contains(name.get<std::string>()))
          fail(where, fmt::format("required property '{}' is not among 'properties'",
                                  name.get<std::string>()));
        required.insert(name.get<std::string>());
      }
    }
    // Further properties: only where additionalProperties allows them (strict mode's reading).
    std::optional<GrammarElement> extra_member;
    if (schema.contains("additionalProperties")) {
      const Json& additional = schema["additionalProperties"];
      if (!additional.is_boolean() || additional.get<bool>())
        extra_member = member(any_string(), value(additional, where + "/additionalProperties"));
    }
    std::vector<GrammarElement> members;
    std::vector<bool> is_required;
    for (const auto& [name, property] : properties.items()) {
      members.push_back(
          member(literal_value(Json(name)), value(property, where + "/properties/" + name)));
      is_required.push_back(required.count(name) > 0);
    }
    const size_t n = members.size();
    // rest[i]: the members from i on, each after a comma. A member may be skipped only when it is
    // optional; extra members come after the listed ones.
    std::vector<int32_t> rest(n + 1);
    for (size_t i = 0; i <= n; ++i) rest[i] = grammar_.add_rule("rest");
    GrammarElement comma = grammar_.literal(",").front();
    if (extra_member) {
      GrammarElement extra = grammar_.choice("extra", {{comma, whitespace(), *extra_member}});
      grammar_.add_alternative(rest[n], {grammar_.repeat(extra, 0, std::nullopt, field_)});
    } else {
      grammar_.add_alternative(rest[n], {});
    }
    for (size_t i = n; i-- > 0;) {
      for (size_t j = i; j < n; ++j) {
        grammar_.add_alternative(
            rest[i], {comma, whitespace(), members[j], grammar_.reference(rest[j + 1])});
        if (is_required[j]) break;
      }
      if (std::none_of(is_required.begin() + static_cast<std::ptrdiff_t>(i), is_required.end(),
                       [](bool b) { return b; }))
        grammar_.add_alternative(rest[i], {grammar_.reference(rest[n])});
    }
    // The first member has no comma before it.
    std::vector<GrammarSequence> first;
    for (size_t j = 0; j < n; ++j) {
      first.push_back({members[j], grammar_.reference(rest[j + 1])});
      if (is_required[j]) break;
    }
    if (required.empty()) {
      first.push_back({});
      if (extra_member) first.push_back({*extra_member, grammar_.reference(rest[n])});
    }
    GrammarSequence sequence = grammar_.literal("{");
    sequence.push_back(whitespace());
    sequence.push_back(grammar_.choice("members", std::move(first)));
    grammar_.append_literal(sequence, "}");
    return grammar_.choice("object", {std::move(sequence)});
  }

  // key ws ":" ws value ws
  GrammarElement member(GrammarElement key, GrammarElement value) {
    GrammarSequence sequence{key, whitespace()};
    grammar_.append_literal(sequence, ":");
    sequence.insert(sequence.end(), {whitespace(), value, whitespace()});
    return grammar_.choice("member", {std::move(sequence)});
  }

  GrammarElement array_value(const Json& schema, const std::string& where) {
    const int64_t min = schema.contains("minItems") ? count(schema, "minItems", where) : 0;
    std::optional<int64_t> max;
    if (schema.contains("maxItems")) max = count(schema, "maxItems", where);
    if (max && *max < min) fail(where, "'maxItems' is below 'minItems'");
    std::optional<GrammarElement> items = any_value();
    if (schema.contains("items")) {
      const Json& given = schema["items"];
      if (given.is_boolean() && !given.get<bool>())
        items.reset();
      else
        items = value(given, where + "/items");
    }
    auto with_ws = [&](GrammarElement item) {
      return grammar_.choice("item", {{item, whitespace()}});
    };
    if (!schema.contains("prefixItems")) {
      if (!items) {
        if (min > 0) fail(where, "'minItems' above 0 with 'items': false");
        max = 0;
      }
      return grammar_.choice(
          "array", {comma_list("[", items ? with_ws(*items) : any_value(), min, max, "]")});
    }
    const Json& prefix = schema["prefixItems"];
    if (!prefix.is_array()) fail(where, "'prefixItems' must be an array");
    const auto fixed = static_cast<int64_t>(prefix.size());
    if (min < fixed)
      fail(where, "'prefixItems' is supported as a tuple: 'minItems' must be at least its length");
    if (max && *max < fixed) fail(where, "'maxItems' is below the length of 'prefixItems'");
    if (!items && min > fixed)
      fail(where, "'minItems' above the length of 'prefixItems' with 'items': false");
    GrammarSequence sequence = grammar_.literal("[");
    sequence.push_back(whitespace());
    GrammarElement comma = grammar_.literal(",").front();
    for (int64_t i = 0; i < fixed; ++i) {
      if (i > 0) sequence.insert(sequence.end(), {comma, whitespace()});
      sequence.push_back(with_ws(
          value(prefix[static_cast<size_t>(i)], fmt::format("{}/prefixItems/{}", where, i))));
    }
    if (items && (!max || *max > fixed)) {
      GrammarElement more = grammar_.choice("next", {{comma, whitespace(), with_ws(*items)}});
      if (fixed == 0) fail(where, "'prefixItems' must not be empty");
      sequence.push_back(grammar_.repeat(
          more, min - fixed, max ? std::optional<int64_t>(*max - fixed) : std::nullopt, field_));
    }
    grammar_.append_literal(sequence, "]");
    return grammar_.choice("array", {std::move(sequence)});
  }

  static constexpr int kMaxDepth = 128;
  int depth_ = 0;
  const Json* root_;
  std::string field_;
  Grammar grammar_;
  std::map<std::string, int32_t> ref_rules_;
  std::optional<GrammarElement> whitespace_, string_character_, any_string_, any_value_,
      any_object_, any_array_;
};

}  // namespace

Grammar json_schema_grammar(const nlohmann::ordered_json& schema, std::string_view field) {
  return SchemaCompiler(&schema, field).compile();
}

Grammar json_object_grammar() {
  return SchemaCompiler(nullptr, "response_format").compile();
}

}  // namespace tessera
