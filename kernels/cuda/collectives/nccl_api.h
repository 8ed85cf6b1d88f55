// The few NCCL 2 declarations Tessera calls, written here so that the CUDA module compiles (and
// CI builds it) without NCCL, which Debian does not package: the library is opened at run time
// (nccl_communicator.cpp). RCCL, AMD's port, has the same API and values. Values are NCCL's
// stable ABI (nccl.h of 2.x).
#pragma once

#include <cstddef>

namespace tessera::nccl {

using Comm = struct ncclComm*;
using Result = int;  // ncclResult_t: 0 is ncclSuccess
constexpr Result kSuccess = 0;

enum DataType : int {
  kInt32 = 2,
  kInt64 = 4,
  kFloat16 = 6,
  kFloat32 = 7,
  kBfloat16 = 9,
};
enum ReduceOp : int { kSum = 0 };

// Signatures of the entry points, with the vendor's stream type as void*.
using CommInitAll = Result (*)(Comm* comms, int count, const int* devices);
using AllReduce = Result (*)(const void* send, void* receive, size_t count, DataType type,
                             ReduceOp op, Comm comm, void* stream);
using AllGather = Result (*)(const void* send, void* receive, size_t send_count, DataType type,
                             Comm comm, void* stream);
using Broadcast = Result (*)(const void* send, void* receive, size_t count, DataType type, int root,
                             Comm comm, void* stream);
using CommAbort = Result (*)(Comm comm);
using CommDestroy = Result (*)(Comm comm);
using GetErrorString = const char* (*)(Result result);
using GetVersion = Result (*)(int* version);

}  // namespace tessera::nccl
