#include "kernels/quant/fp8_scaling.h"

#include "runtime/check.h"

namespace tessera {

const char* fp8_activation_scale_name(Fp8ActivationScale scale) {
  switch (scale) {
    case Fp8ActivationScale::token:
      return "token";
    case Fp8ActivationScale::group:
      return "group";
    case Fp8ActivationScale::fixed:
      return "fixed";
  }
  return "?";
}

Fp8ActivationScale parse_fp8_activation_scale(std::string_view name) {
  for (Fp8ActivationScale scale :
       {Fp8ActivationScale::token, Fp8ActivationScale::group, Fp8ActivationScale::fixed})
    if (name == fp8_activation_scale_name(scale)) return scale;
  throw Error(
      fmt::format("unknown FP8 activation scale '{}'; valid choices: token, group, fixed", name));
}

}  // namespace tessera
