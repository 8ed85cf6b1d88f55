// The on-disk store of measured choices (kernels/measured_choices.h): one file per device under
// <cache_dir>/measured, named by a hash of the device's description and holding that description
// and "problem<TAB>choice" lines, written whole under a temporary name and checked when read
// (cache_entry.h). A file that fails the check, is too large or belongs to another device is not
// used (its choices are measured again); a record merges with what other processes wrote since.
// Nothing here throws into a run: a directory that cannot be written keeps choices in memory, with
// one warning.
#pragma once

#include <string>

namespace tessera {

// Installs the store for `cache_dir` (compilation.cache_dir, resolved), reusing this process's
// store of that directory. The compiler calls it for every plan it compiles.
void use_measured_choice_files(const std::string& cache_dir);

// The file that holds `device`'s choices under `cache_dir` (for tests and error messages).
std::string measured_choice_file(const std::string& cache_dir, const std::string& device);

}  // namespace tessera
