// Unicode data for NFC/NFD normalization, generated into unicode_tables.cpp by
// scripts/gen_unicode_tables.py. Every table is sorted by its first field.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera::unicode_tables {

struct CombiningClassRange {
  char32_t first, last;
  uint8_t combining_class;
};
struct Decomposition {
  char32_t code_point, first, second;  // second == 0: a singleton decomposition
};
struct Composition {
  char32_t first, second, composite;
};
struct CodePointRange {
  char32_t first, last;
};

extern const CombiningClassRange kCombiningClasses[];
extern const size_t kCombiningClassCount;
extern const Decomposition kDecompositions[];
extern const size_t kDecompositionCount;
extern const Composition kCompositions[];  // primary composites only
extern const size_t kCompositionCount;
// Code points where NFC quick check is not a plain "yes" or the combining class is nonzero: a
// string without any of them is already in NFC.
extern const CodePointRange kNotNfcQuickCheckYes[];
extern const size_t kNotNfcQuickCheckYesCount;

}  // namespace tessera::unicode_tables
