// Host-side launchers of the CUDA kernels. Plain C++ types only (no CUDA or torch headers), so the
// pybind11 bindings compile with the host compiler. Pointers are device addresses passed as
// integers; `stream` is a cudaStream_t as an integer (0 = legacy default stream). Each launcher
// returns an empty string on success, or the CUDA error / argument error as a message.
#pragma once
#include <cstdint>
#include <string>

#include "semiring_mode.h"

namespace contextrag {
namespace cuda {

// dtype codes shared with python/contextrag/ops/_cuda.py (DTYPE_CODE)
enum DType : int { kF32 = 0, kF64 = 1, kF16 = 2, kBF16 = 3 };

std::string semiring(SemiringMode op, int dtype, uintptr_t a, uintptr_t b, uintptr_t out, int64_t M, int64_t N, int64_t K,
                     int64_t s_am, int64_t s_ak, int64_t s_bk, int64_t s_bn, int split, uintptr_t ws,
                     uintptr_t stream);
int semiring_default_split(int64_t M, int64_t N, int64_t K, int sms);

std::string kmeans_assign(int dtype, uintptr_t x, uintptr_t c, uintptr_t cn, uintptr_t labels, uintptr_t d2,
                          int64_t n, int64_t k, int64_t d, uintptr_t blk_prob, uintptr_t blk_row0,
                          uintptr_t prob_row1, uintptr_t prob_coff, uintptr_t prob_k, int64_t n_blocks,
                          uintptr_t stream);
int assign_rows_per_block();
// Tensor-core (WMMA) assignment for float16/bfloat16 X, single problem.
std::string kmeans_assign_tc(int dtype, uintptr_t x, uintptr_t c, uintptr_t cn, uintptr_t labels, uintptr_t d2,
                             int64_t n, int64_t k, int64_t d, uintptr_t stream);

std::string kmeans_update(int dtype, uintptr_t x, uintptr_t labels, uintptr_t sums, uintptr_t counts,
                          int64_t n, int64_t k, int64_t d, uintptr_t stream);

std::string fcm_memberships(int dtype, uintptr_t x, uintptr_t c, uintptr_t cn, uintptr_t u, int64_t n,
                            int64_t n_centres, int64_t d, double p, double snap, uintptr_t stream);
// Largest c for fcm_memberships on the current device (its shared-memory opt-in limit minus the
// kernel's static shared memory), -1 when no device can be queried.
int fcm_max_centres(int dtype);
// The same arithmetic for a given opt-in limit (bytes), from the kernel's static layout: no device.
int fcm_centres_limit(int dtype, int64_t optin_bytes);

// Launches a trivial kernel on the current device and reads it back: detects a toolkit newer than
// the driver before any real kernel. out[8]: runtime version, driver version, device, CC major,
// CC minor, SMs, shared-memory opt-in bytes, 1 when the kernel ran.
std::string probe(int* out);


}  // namespace cuda
}  // namespace contextrag
