#include "models/hf_config_fields.h"

#include <limits>

#include "models/json_input.h"
#include "runtime/check.h"

namespace tessera {

using nlohmann::json;

namespace {

// An integer that int64 holds (JSON integers past 2^63 - 1 parse as unsigned).
bool is_int64(const json& value) {
  return value.is_number_integer() &&
         (!value.is_number_unsigned() ||
          value.get<uint64_t>() <= uint64_t{std::numeric_limits<int64_t>::max()});
}

}  // namespace

int64_t HfConfigFields::integer(const char* key) const {
  TESSERA_REQUIRE(has(key), "{}: required field '{}' is missing", file_, key);
  const json& value = object_[key];
  TESSERA_REQUIRE(is_int64(value), "{}: field '{}' must be an integer, got {}", file_, key,
                  json_excerpt(value));
  return value.get<int64_t>();
}

int64_t HfConfigFields::integer(const char* key, int64_t fallback) const {
  return has(key) ? integer(key) : fallback;
}

double HfConfigFields::number(const char* key, double fallback) const {
  if (!has(key)) return fallback;
  const json& value = object_[key];
  TESSERA_REQUIRE(value.is_number(), "{}: field '{}' must be a number, got {}", file_, key,
                  json_excerpt(value));
  return value.get<double>();
}

bool HfConfigFields::boolean(const char* key, bool fallback) const {
  if (!has(key)) return fallback;
  const json& value = object_[key];
  TESSERA_REQUIRE(value.is_boolean(), "{}: field '{}' must be true or false, got {}", file_, key,
                  json_excerpt(value));
  return value.get<bool>();
}

std::string HfConfigFields::text(const char* key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  const json& value = object_[key];
  TESSERA_REQUIRE(value.is_string(), "{}: field '{}' must be a string, got {}", file_, key,
                  json_excerpt(value));
  return value.get<std::string>();
}

std::vector<std::string> HfConfigFields::texts(const char* key) const {
  if (!has(key)) return {};
  const json& value = object_[key];
  TESSERA_REQUIRE(value.is_array(), "{}: field '{}' must be a list of strings, got {}", file_, key,
                  json_excerpt(value));
  std::vector<std::string> result;
  for (const json& item : value) {
    TESSERA_REQUIRE(item.is_string(), "{}: field '{}' must hold strings, got {}", file_, key,
                    json_excerpt(value));
    result.push_back(item.get<std::string>());
  }
  return result;
}

std::vector<int64_t> HfConfigFields::ids(const char* key) const {
  if (!has(key)) return {};
  const json& value = object_[key];
  if (is_int64(value)) return {value.get<int64_t>()};
  TESSERA_REQUIRE(value.is_array(), "{}: field '{}' must be an id or a list of ids, got {}", file_,
                  key, json_excerpt(value));
  std::vector<int64_t> result;
  for (const json& id : value) {
    TESSERA_REQUIRE(is_int64(id), "{}: field '{}' must hold integer ids, got {}", file_, key,
                    json_excerpt(value));
    result.push_back(id.get<int64_t>());
  }
  return result;
}

HfConfigFields HfConfigFields::object(const char* key) const {
  TESSERA_REQUIRE(has(key), "{}: required field '{}' is missing", file_, key);
  const json& value = object_[key];
  TESSERA_REQUIRE(value.is_object(), "{}: '{}' must be an object, got {}", file_, key,
                  json_excerpt(value));
  return HfConfigFields(value, file_ + " " + key);
}

RopeScaling read_rope_scaling(const HfConfigFields& rope) {
  RopeScaling scaling;
  scaling.type = rope.text("rope_type", rope.text("type", ""));
  if (scaling.type == "default") scaling.type.clear();  // transformers' name for "none"
  scaling.factor = rope.number("factor", scaling.factor);
  scaling.low_freq_factor = rope.number("low_freq_factor", scaling.low_freq_factor);
  scaling.high_freq_factor = rope.number("high_freq_factor", scaling.high_freq_factor);
  scaling.original_max_position_embeddings =
      rope.integer("original_max_position_embeddings", scaling.original_max_position_embeddings);
  return scaling;
}

}  // namespace tessera
