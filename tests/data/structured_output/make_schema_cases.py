#!/usr/bin/env python3
"""Writes schema_cases.json: JSON schemas, each with candidate texts and whether a JSON Schema
validator (python-jsonschema, Draft 2020-12) finds them valid. test_json_schema_grammar checks that
Tessera's grammar of each schema accepts exactly the valid ones.

The candidates are written the way Tessera's grammar writes JSON (properties in the schema's
order, at most one space or a newline and indentation between tokens): a valid text in another
order or spacing would be valid for the validator and still not produced, which is by design.
Patterns are anchored (Tessera reads a pattern as the whole string). Usage:
  python3 tests/data/structured_output/make_schema_cases.py"""
import json
import pathlib

import jsonschema

CASES = [
    ({"type": "boolean"}, ["true", "false", "1", "\"true\"", "True"]),
    ({"type": "null"}, ["null", "nil", "0"]),
    ({"type": "integer"}, ["0", "-0", "7", "-12", "0012", "1.5", "12345678901234", "-"]),
    ({"type": "integer", "minimum": -5, "maximum": 123},
     ["-5", "-6", "0", "99", "100", "123", "124", "-10", "999", "50"]),
    ({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10},
     ["0", "1", "9", "10", "-1", "5"]),
    ({"type": "integer", "minimum": 1000}, ["999", "1000", "1001", "12345", "9999999", "-1000"]),
    ({"type": "integer", "maximum": -20}, ["-20", "-19", "-21", "-300", "0", "20"]),
    ({"type": "number"}, ["0", "-0.5", "3.25", "1e10", "2E-3", "-1.5e+2", ".5", "1.", "01", "nan"]),
    ({"type": "number", "minimum": 0, "maximum": 5},
     ["0", "0.0", "2.5", "5", "5.0", "5.00", "5.5", "-0.5", "4.999", "6"]),
    ({"type": "number", "exclusiveMinimum": 0, "maximum": 1},
     ["0", "0.0", "0.001", "0.5", "1", "1.0", "1.01", "-0.1"]),
    ({"type": "number", "minimum": -2, "exclusiveMaximum": -1},
     ["-2", "-2.0", "-2.5", "-1.5", "-1", "-1.0", "-0.5", "0"]),
    ({"type": "string"}, ["\"\"", "\"abc\"", "\"a\\\"b\"", "\"\\u00e9\"", "\"é\"", "\"a\nb\"",
                          "\"\\x\"", "abc", "\"tab\\there\""]),
    ({"type": "string", "minLength": 2, "maxLength": 4},
     ["\"a\"", "\"ab\"", "\"abcd\"", "\"abcde\"", "\"é€\"", "\"\""]),
    ({"type": "string", "pattern": "^[a-z]+-[0-9]{2,3}$"},
     ["\"ab-12\"", "\"ab-1234\"", "\"ab-1\"", "\"-12\"", "\"x-999\"", "\"X-99\""]),
    ({"type": "string", "pattern": "^(cat|dog)s?$"},
     ["\"cat\"", "\"cats\"", "\"dogs\"", "\"bird\"", "\"catss\""]),
    ({"type": "string", "format": "date"},
     ["\"2024-02-29\"", "\"2024-13-01\"", "\"2024-1-01\"", "\"1999-12-31\"", "\"hello\""]),
    ({"type": "string", "format": "uuid"},
     ["\"123e4567-e89b-12d3-a456-426614174000\"", "\"123e4567e89b12d3a456426614174000\"",
      "\"zzze4567-e89b-12d3-a456-426614174000\""]),
    ({"enum": ["red", "green", 3, None]},
     ["\"red\"", "\"green\"", "3", "null", "\"blue\"", "4"]),
    ({"const": {"a": [1, 2]}}, ["{\"a\":[1,2]}", "{\"a\":[1,3]}", "1"]),
    ({"type": ["string", "null"]}, ["\"x\"", "null", "1"]),
    ({"type": "object",
      "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
      "required": ["name", "age"], "additionalProperties": False},
     ["{\"name\":\"Ada\",\"age\":36}", "{\"name\": \"Ada\", \"age\": 36}",
      "{\n  \"name\": \"Ada\",\n  \"age\": 36\n}", "{\"name\":\"Ada\"}", "{\"age\":36}",
      "{\"name\":\"Ada\",\"age\":-1}", "{\"name\":\"Ada\",\"age\":36,\"x\":1}", "{}"]),
    ({"type": "object",
      "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}, "c": {"type": "null"}},
      "required": ["b"]},
     ["{\"b\":true}", "{\"a\":1,\"b\":false}", "{\"b\":true,\"c\":null}",
      "{\"a\":1,\"b\":true,\"c\":null}", "{\"a\":1}", "{\"a\":1,\"c\":null}", "{}"]),
    ({"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}},
     ["{}", "{\"x\":1}", "{\"y\":2}", "{\"x\":1,\"y\":2}", "{\"x\":\"1\"}"]),
    ({"type": "object", "additionalProperties": {"type": "integer"}},
     ["{}", "{\"a\":1}", "{\"a\":1,\"b\":2}", "{\"a\":\"x\"}"]),
    ({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
     ["[]", "[1]", "[1,2,3]", "[1, 2]", "[1,2,3,4]", "[\"a\"]", "[\n  1\n]"]),
    ({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "minItems": 2,
      "items": False},
     ["[\"a\",1]", "[\"a\"]", "[\"a\",1,2]", "[1,\"a\"]"]),
    ({"$defs": {"node": {"type": "object",
                         "properties": {"value": {"type": "integer"},
                                        "next": {"anyOf": [{"$ref": "#/$defs/node"},
                                                           {"type": "null"}]}},
                         "required": ["value", "next"], "additionalProperties": False}},
      "$ref": "#/$defs/node"},
     ["{\"value\":1,\"next\":null}", "{\"value\":1,\"next\":{\"value\":2,\"next\":null}}",
      "{\"value\":1}", "{\"value\":1,\"next\":{\"value\":2}}"]),
    ({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]},
     ["1", "\"a\"", "\"ab\"", "true"]),
    ({}, ["1", "\"x\"", "{\"a\":[1,{\"b\":null}]}", "[true,false]", "{", "nul"]),
]


def main():
    out = []
    for schema, texts in CASES:
        validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
        candidates = []
        for text in texts:
            try:
                value = json.loads(text)
                valid = validator.is_valid(value)
            except json.JSONDecodeError:
                valid = False
            candidates.append({"text": text, "valid": valid})
        out.append({"schema": schema, "candidates": candidates})
    path = pathlib.Path(__file__).with_name("schema_cases.json")
    path.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path} ({len(out)} schemas)")


if __name__ == "__main__":
    main()
