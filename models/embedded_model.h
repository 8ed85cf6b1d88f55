// Models shipped inside Tessera (models/embedded/): "embedded:NAME" names one, and
// embedded:stories260K is the default model, so a first run prints real text with no download.
#pragma once

#include <string>
#include <string_view>

namespace tessera {

inline constexpr std::string_view kEmbeddedModelPrefix = "embedded:";
inline constexpr std::string_view kDefaultModel = "embedded:stories260K";

// The file a model string names: for "embedded:NAME" the path of NAME.gguf, found beside the core
// libraries (the build tree's models/) or in the install's share/tessera/models/; any other string
// as it is. Throws naming the model and the folders looked in when an embedded model is missing.
std::string resolve_model_path(const std::string& model);

}  // namespace tessera
