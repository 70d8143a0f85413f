// Small device helpers shared by the CUDA kernels.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace contextrag {
namespace cuda {

template <typename Acc, typename T>
__device__ __forceinline__ Acc cvt(T v) { return static_cast<Acc>(v); }
template <>
__device__ __forceinline__ float cvt<float, __half>(__half v) { return __half2float(v); }
template <>
__device__ __forceinline__ float cvt<float, __nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T pos_inf();
template <>
__device__ __forceinline__ float pos_inf<float>() { return __int_as_float(0x7f800000); }
template <>
__device__ __forceinline__ double pos_inf<double>() { return __longlong_as_double(0x7ff0000000000000LL); }

// The error of the last launch, cleared (cudaGetLastError resets it).
inline std::string check_launch(const char* what) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return std::string(what) + ": " + cudaGetErrorString(e);
  return std::string();
}

// Message for a failed runtime call, with the error cleared: otherwise the next, unrelated launch
// would report it (a failed cudaFuncSetAttribute stays pending until someone calls cudaGetLastError).
inline std::string api_error(const char* what, cudaError_t e) {
  cudaGetLastError();
  return std::string(what) + ": " + cudaGetErrorString(e);
}

inline cudaStream_t as_stream(uintptr_t s) { return reinterpret_cast<cudaStream_t>(s); }

inline int current_device() {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return dev;
}

inline int device_attr(cudaDeviceAttr attr, int fallback) {
  int v = 0;
  if (cudaDeviceGetAttribute(&v, attr, current_device()) != cudaSuccess) {
    cudaGetLastError();
    return fallback;
  }
  return v;
}

inline int sm_count() {
  const int sms = device_attr(cudaDevAttrMultiProcessorCount, 1);
  return sms > 0 ? sms : 1;
}

// Shared memory one block may opt in to (static + dynamic), bytes; 0 when it cannot be queried.
inline int smem_optin() { return device_attr(cudaDevAttrMaxSharedMemoryPerBlockOptin, 0); }

// Makes the device that owns `ptr` current for the guard's lifetime, so data on cuda:1 launches
// on cuda:1 whatever the caller's current device; restores the previous device afterwards.
// Host or unknown pointers leave the current device as it is (the launch then reports the error).
class DeviceGuard {
 public:
  explicit DeviceGuard(uintptr_t ptr) {
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, reinterpret_cast<const void*>(ptr)) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged) return;
    int cur = 0;
    if (cudaGetDevice(&cur) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    if (cur == a.device) return;
    if (cudaSetDevice(a.device) == cudaSuccess) prev_ = cur;
    else cudaGetLastError();
  }
  ~DeviceGuard() {
    if (prev_ >= 0 && cudaSetDevice(prev_) != cudaSuccess) cudaGetLastError();
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
};

}  // namespace cuda
}  // namespace contextrag
