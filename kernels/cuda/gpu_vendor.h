// The GPU vendor header (llama.cpp's vendors/hip.h idea): the files in kernels/cuda name the GPU
// runtime only through the gpu* aliases below, which map to CUDA by default and to HIP when built
// for AMD (TESSERA_GPU_HIP, set by the HIP module's build, or __HIP_PLATFORM_AMD__). One set of
// sources then serves both modules, libtessera-cuda.so and libtessera-hip.so; kGpuDeviceType tells
// the registrations which device type they serve. BLAS is CUDA's alone (cuBLAS, gemm.cpp): ROCm
// as Debian ships it has no hipBLAS, so GEMMs on ROCm run Tessera's own (portable_gemm.cu).
//
// Only this file may name cuda*/cublas*/hip* directly. Keep it a plain mapping: no logic here, so
// a reader can check each line against the two vendors' documentation.
#pragma once

#include "runtime/device.h"

#if defined(__HIP_PLATFORM_AMD__) && !defined(TESSERA_GPU_HIP)
#define TESSERA_GPU_HIP 1
#endif

#if defined(TESSERA_GPU_HIP)

#include <hip/hip_bfloat16.h>
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>

// ---- runtime: errors, devices, memory
#define gpuError_t hipError_t
#define gpuSuccess hipSuccess
#define gpuErrorNoDevice hipErrorNoDevice
#define gpuErrorInsufficientDriver hipErrorInsufficientDriver
#define gpuErrorMemoryAllocation hipErrorOutOfMemory
#define gpuGetErrorString hipGetErrorString
#define gpuGetErrorName hipGetErrorName
#define gpuGetLastError hipGetLastError
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuGetDevice hipGetDevice
#define gpuSetDevice hipSetDevice
#define gpuDeviceProp hipDeviceProp_t
#define gpuGetDeviceProperties hipGetDeviceProperties
#define gpuDriverGetVersion hipDriverGetVersion
#define gpuRuntimeGetVersion hipRuntimeGetVersion
// hipDeviceProp_t has no opt-in limit: a block may use all it reports (64 KiB of LDS on CDNA).
#define GPU_PROP_SHARED_MEM_PER_BLOCK_OPTIN sharedMemPerBlock
#define gpuDeviceSynchronize hipDeviceSynchronize
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMemGetInfo hipMemGetInfo
#define gpuMemcpyAsync hipMemcpyAsync
#define gpuHostMalloc(pointer, bytes) hipHostMalloc(pointer, bytes, 0)
#define gpuFreeHost hipHostFree
#define gpuMemcpyPeerAsync hipMemcpyPeerAsync
#define gpuMemsetAsync hipMemsetAsync
#define gpuMemcpyKind hipMemcpyKind
#define gpuMemcpyHostToDevice hipMemcpyHostToDevice
#define gpuMemcpyDeviceToHost hipMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define gpuMemcpyHostToHost hipMemcpyHostToHost
#define gpuFuncSetAttribute hipFuncSetAttribute
#define gpuFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize

// ---- streams, events, graphs
#define gpuStream_t hipStream_t
#define gpuStreamCreateWithFlags hipStreamCreateWithFlags
#define gpuStreamNonBlocking hipStreamNonBlocking
#define gpuStreamDestroy hipStreamDestroy
#define gpuStreamSynchronize hipStreamSynchronize
#define gpuEvent_t hipEvent_t
#define gpuEventCreate hipEventCreate
#define gpuEventDestroy hipEventDestroy
#define gpuEventRecord hipEventRecord
#define gpuEventSynchronize hipEventSynchronize
#define gpuEventElapsedTime hipEventElapsedTime
#define gpuEventQuery hipEventQuery
#define gpuErrorNotReady hipErrorNotReady
#define gpuGraph_t hipGraph_t
#define gpuGraphExec_t hipGraphExec_t
#define gpuStreamBeginCapture hipStreamBeginCapture
#define gpuStreamEndCapture hipStreamEndCapture
#define gpuStreamCaptureModeThreadLocal hipStreamCaptureModeThreadLocal
#define gpuStreamCaptureModeRelaxed hipStreamCaptureModeRelaxed
#define gpuStreamCaptureMode hipStreamCaptureMode
#define gpuThreadExchangeStreamCaptureMode hipThreadExchangeStreamCaptureMode
#define gpuGraphInstantiateWithFlags hipGraphInstantiateWithFlags
#define gpuGraphGetNodes hipGraphGetNodes
#define gpuGraphDestroy hipGraphDestroy
#define gpuGraphExecDestroy hipGraphExecDestroy
#define gpuGraphLaunch hipGraphLaunch
// ROCm deprecates these for roctracer (not in Debian); rocprof still honours them.
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-declarations"
inline hipError_t gpuProfilerStart() {
  return hipProfilerStart();
}
inline hipError_t gpuProfilerStop() {
  return hipProfilerStop();
}
#pragma clang diagnostic pop
#define gpuLaunchHostFunc hipLaunchHostFunc
#define gpuStreamIsCapturing hipStreamIsCapturing
#define gpuStreamCaptureStatus hipStreamCaptureStatus
#define gpuStreamCaptureStatusNone hipStreamCaptureStatusNone

// ---- device code: 16-bit float types and warp shuffles (wavefronts are 64 lanes on CDNA)
using gpu_bfloat16 = hip_bfloat16;
using gpu_half = __half;
#define GPU_WARP_SIZE 64
#define GPU_SHFL_XOR(value, lane_mask) __shfl_xor((value), (lane_mask))
// A wavefront runs in lockstep; the builtin keeps the compiler from reordering across it.
#define GPU_SYNCWARP() __builtin_amdgcn_wave_barrier()

// ---- run-time compilation and loading of generated kernels (compile/codegen). Loading differs
// in shape: HIP loads a module (hipModule*) and launches its functions with hipModuleLaunchKernel,
// where CUDA loads a context-independent library (cudaLibrary*) launched by cudaLaunchKernel.
#include <hip/hiprtc.h>
#define gpurtcProgram hiprtcProgram
#define gpurtcResult hiprtcResult
#define GPURTC_SUCCESS HIPRTC_SUCCESS
#define gpurtcGetErrorString hiprtcGetErrorString
#define gpurtcVersion hiprtcVersion
#define gpurtcCreateProgram hiprtcCreateProgram
#define gpurtcCompileProgram hiprtcCompileProgram
#define gpurtcDestroyProgram hiprtcDestroyProgram
#define gpurtcGetProgramLogSize hiprtcGetProgramLogSize
#define gpurtcGetProgramLog hiprtcGetProgramLog
#define gpurtcGetCodeSize hiprtcGetCodeSize
#define gpurtcGetCode hiprtcGetCode
#define gpuModule_t hipModule_t
#define gpuFunction_t hipFunction_t
#define gpuModuleLoadData hipModuleLoadData
#define gpuModuleGetFunction hipModuleGetFunction
#define gpuModuleLaunchKernel hipModuleLaunchKernel

namespace tessera {
inline constexpr DeviceType kGpuDeviceType = DeviceType::hip;
}  // namespace tessera

#else  // CUDA

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

// ---- runtime: errors, devices, memory
#define gpuError_t cudaError_t
#define gpuSuccess cudaSuccess
#define gpuErrorNoDevice cudaErrorNoDevice
#define gpuErrorInsufficientDriver cudaErrorInsufficientDriver
#define gpuErrorMemoryAllocation cudaErrorMemoryAllocation
#define gpuGetErrorString cudaGetErrorString
#define gpuGetErrorName cudaGetErrorName
#define gpuGetLastError cudaGetLastError
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuGetDevice cudaGetDevice
#define gpuSetDevice cudaSetDevice
#define gpuDeviceProp cudaDeviceProp
#define gpuGetDeviceProperties cudaGetDeviceProperties
#define gpuDriverGetVersion cudaDriverGetVersion
#define gpuRuntimeGetVersion cudaRuntimeGetVersion
#define GPU_PROP_SHARED_MEM_PER_BLOCK_OPTIN sharedMemPerBlockOptin
#define gpuDeviceSynchronize cudaDeviceSynchronize
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMemGetInfo cudaMemGetInfo
#define gpuMemcpyAsync cudaMemcpyAsync
#define gpuHostMalloc(pointer, bytes) cudaMallocHost(pointer, bytes)
#define gpuFreeHost cudaFreeHost
#define gpuMemcpyPeerAsync cudaMemcpyPeerAsync
#define gpuMemsetAsync cudaMemsetAsync
#define gpuMemcpyKind cudaMemcpyKind
#define gpuMemcpyHostToDevice cudaMemcpyHostToDevice
#define gpuMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define gpuMemcpyHostToHost cudaMemcpyHostToHost
#define gpuFuncSetAttribute cudaFuncSetAttribute
#define gpuFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize

// ---- streams, events, graphs
#define gpuStream_t cudaStream_t
#define gpuStreamCreateWithFlags cudaStreamCreateWithFlags
#define gpuStreamNonBlocking cudaStreamNonBlocking
#define gpuStreamDestroy cudaStreamDestroy
#define gpuStreamSynchronize cudaStreamSynchronize
#define gpuEvent_t cudaEvent_t
#define gpuEventCreate cudaEventCreate
#define gpuEventDestroy cudaEventDestroy
#define gpuEventRecord cudaEventRecord
#define gpuEventSynchronize cudaEventSynchronize
#define gpuEventElapsedTime cudaEventElapsedTime
#define gpuEventQuery cudaEventQuery
#define gpuErrorNotReady cudaErrorNotReady
#define gpuGraph_t cudaGraph_t
#define gpuGraphExec_t cudaGraphExec_t
#define gpuStreamBeginCapture cudaStreamBeginCapture
#define gpuStreamEndCapture cudaStreamEndCapture
#define gpuStreamCaptureModeThreadLocal cudaStreamCaptureModeThreadLocal
#define gpuStreamCaptureModeRelaxed cudaStreamCaptureModeRelaxed
#define gpuStreamCaptureMode cudaStreamCaptureMode
#define gpuThreadExchangeStreamCaptureMode cudaThreadExchangeStreamCaptureMode
#define gpuGraphInstantiateWithFlags cudaGraphInstantiateWithFlags
#define gpuGraphGetNodes cudaGraphGetNodes
#define gpuGraphDestroy cudaGraphDestroy
#define gpuGraphExecDestroy cudaGraphExecDestroy
#define gpuGraphLaunch cudaGraphLaunch
#define gpuProfilerStart cudaProfilerStart
#define gpuProfilerStop cudaProfilerStop
#define gpuLaunchHostFunc cudaLaunchHostFunc
#define gpuStreamIsCapturing cudaStreamIsCapturing
#define gpuStreamCaptureStatus cudaStreamCaptureStatus
#define gpuStreamCaptureStatusNone cudaStreamCaptureStatusNone

// ---- BLAS (CUDA only; see the top of this file)
#define gpublasHandle_t cublasHandle_t
#define gpublasStatus_t cublasStatus_t
#define GPUBLAS_STATUS_SUCCESS CUBLAS_STATUS_SUCCESS
#define gpublasGetStatusString cublasGetStatusString
#define gpublasCreate cublasCreate
#define gpublasDestroy cublasDestroy
#define gpublasSetStream cublasSetStream
#define gpublasSetWorkspace cublasSetWorkspace
#define gpublasSetMathMode cublasSetMathMode
#define GPUBLAS_DEFAULT_MATH CUBLAS_DEFAULT_MATH
#define gpublasGemmEx cublasGemmEx
#define gpublasGemmStridedBatchedEx cublasGemmStridedBatchedEx
#define GPUBLAS_OP_N CUBLAS_OP_N
#define GPUBLAS_OP_T CUBLAS_OP_T
#define GPUBLAS_COMPUTE_32F CUBLAS_COMPUTE_32F
#define GPUBLAS_GEMM_DEFAULT CUBLAS_GEMM_DEFAULT
#define gpuDataType cudaDataType
#define GPU_R_32F CUDA_R_32F
#define GPU_R_16F CUDA_R_16F
#define GPU_R_16BF CUDA_R_16BF
#define gpublasOperation_t cublasOperation_t
#define GPUBLAS_STATUS_NOT_SUPPORTED CUBLAS_STATUS_NOT_SUPPORTED

// ---- BLASLt: matmul descriptors, layouts, heuristics, epilogues (cuBLASLt)
#include <cublasLt.h>
#define gpublasLtHandle_t cublasLtHandle_t
#define gpublasLtCreate cublasLtCreate
#define gpublasLtGetVersion cublasLtGetVersion
#define gpublasLtDestroy cublasLtDestroy
#define gpublasLtMatmul cublasLtMatmul
#define gpublasLtMatmulAlgo_t cublasLtMatmulAlgo_t
#define gpublasLtMatmulAlgoGetHeuristic cublasLtMatmulAlgoGetHeuristic
#define gpublasLtMatmulHeuristicResult_t cublasLtMatmulHeuristicResult_t
#define gpublasLtMatmulDesc_t cublasLtMatmulDesc_t
#define gpublasLtMatmulDescCreate cublasLtMatmulDescCreate
#define gpublasLtMatmulDescDestroy cublasLtMatmulDescDestroy
#define gpublasLtMatmulDescSetAttribute cublasLtMatmulDescSetAttribute
#define GPUBLASLT_MATMUL_DESC_TRANSA CUBLASLT_MATMUL_DESC_TRANSA
#define GPUBLASLT_MATMUL_DESC_TRANSB CUBLASLT_MATMUL_DESC_TRANSB
#define GPUBLASLT_MATMUL_DESC_EPILOGUE CUBLASLT_MATMUL_DESC_EPILOGUE
#define GPUBLASLT_MATMUL_DESC_BIAS_POINTER CUBLASLT_MATMUL_DESC_BIAS_POINTER
#define GPUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE
#define gpublasLtEpilogue_t cublasLtEpilogue_t
#define GPUBLASLT_EPILOGUE_DEFAULT CUBLASLT_EPILOGUE_DEFAULT
#define GPUBLASLT_EPILOGUE_BIAS CUBLASLT_EPILOGUE_BIAS
#define gpublasLtMatrixLayout_t cublasLtMatrixLayout_t
#define gpublasLtMatrixLayoutCreate cublasLtMatrixLayoutCreate
#define gpublasLtMatrixLayoutDestroy cublasLtMatrixLayoutDestroy
#define gpublasLtMatrixLayoutSetAttribute cublasLtMatrixLayoutSetAttribute
#define GPUBLASLT_MATRIX_LAYOUT_BATCH_COUNT CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT
#define GPUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET
#define gpublasLtMatmulPreference_t cublasLtMatmulPreference_t
#define gpublasLtMatmulPreferenceCreate cublasLtMatmulPreferenceCreate
#define gpublasLtMatmulPreferenceDestroy cublasLtMatmulPreferenceDestroy
#define gpublasLtMatmulPreferenceSetAttribute cublasLtMatmulPreferenceSetAttribute
#define GPUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES
#define GPUBLASLT_HAS_PREFERENCE_FILTERS 1
#define GPUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK
#define GPUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE
#define GPUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES
#define GPUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES
#define GPUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES
#define GPUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES

// ---- device code: 16-bit float types and warp shuffles
using gpu_bfloat16 = __nv_bfloat16;
using gpu_half = __half;
#define GPU_WARP_SIZE 32
#define GPU_SHFL_XOR(value, lane_mask) __shfl_xor_sync(0xffffffffu, (value), (lane_mask))
#define GPU_SYNCWARP() __syncwarp()

// ---- run-time compilation and loading of generated kernels (compile/codegen), through the
// runtime only: a cudaLibrary_t is context-independent and its cudaKernel_t launches with
// cudaLaunchKernel, so nothing links the driver library (libcuda).
#include <nvrtc.h>
#define gpurtcProgram nvrtcProgram
#define gpurtcResult nvrtcResult
#define GPURTC_SUCCESS NVRTC_SUCCESS
#define gpurtcGetErrorString nvrtcGetErrorString
#define gpurtcVersion nvrtcVersion
#define gpurtcCreateProgram nvrtcCreateProgram
#define gpurtcCompileProgram nvrtcCompileProgram
#define gpurtcDestroyProgram nvrtcDestroyProgram
#define gpurtcGetProgramLogSize nvrtcGetProgramLogSize
#define gpurtcGetProgramLog nvrtcGetProgramLog
#define gpurtcGetCodeSize nvrtcGetCUBINSize
#define gpurtcGetCode nvrtcGetCUBIN
#define gpurtcGetPTXSize nvrtcGetPTXSize
#define gpurtcGetPTX nvrtcGetPTX
#define gpurtcGetNumSupportedArchs nvrtcGetNumSupportedArchs
#define gpurtcGetSupportedArchs nvrtcGetSupportedArchs
#define gpuLibrary_t cudaLibrary_t
#define gpuKernel_t cudaKernel_t
#define gpuLibraryLoadData cudaLibraryLoadData
#define gpuLibraryGetKernel cudaLibraryGetKernel
#define gpuLaunchKernel cudaLaunchKernel

namespace tessera {
inline constexpr DeviceType kGpuDeviceType = DeviceType::cuda;
}  // namespace tessera

#endif
