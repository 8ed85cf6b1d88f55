// CPU code generation: a fused row kernel as C++ source (a loop over a range of rows; the runtime
// splits rows across threads), compiled by the system C++ compiler into a shared object.
#pragma once

#include <string>

#include "compile/codegen/row_kernel.h"

namespace tessera {

// extern "C" void tessera_kernel(int64_t row_begin, int64_t row_end, void* const* buffers):
// buffers holds the inputs, then the outputs, in FusedKernel order.
std::string generate_cpp_kernel(const RowKernelBody& body, const std::string& name);
using CpuKernelFunction = void (*)(int64_t row_begin, int64_t row_end, void* const* buffers);

}  // namespace tessera
