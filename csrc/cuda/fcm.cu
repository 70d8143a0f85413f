// FCM memberships: the k-means distance tile (distance_tile.cuh); the block keeps its rows' distances
// to all c centres in shared memory and a warp per row runs the membership epilogue (min, ratio
// powers, normalisation) in one pass, writing each membership once.
#include "distance_tile.cuh"
#include "launch.h"

namespace contextrag {
namespace cuda {
namespace {

using namespace tile;

template <typename Acc>
__device__ __forceinline__ Acc ratio_pow(Acc r, Acc p);
template <>
__device__ __forceinline__ float ratio_pow<float>(float r, float p) { return exp2f(p * log2f(r)); }
template <>
__device__ __forceinline__ double ratio_pow<double>(double r, double p) { return exp2(p * log2(r)); }

template <typename TIn, typename Acc>
__global__ void __launch_bounds__(ATHREADS)
fcm_kernel(const TIn* __restrict__ X, const TIn* __restrict__ C, const Acc* __restrict__ cn, Acc* __restrict__ U,
           int64_t n, int64_t c, int64_t d, Acc p, Acc snap) {
  __shared__ Acc Xs[ABD][ABM + 4];
  __shared__ Acc Cs[ABD][ABK + 4];
  __shared__ Acc xn_s[ABM];
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Acc* Ds = reinterpret_cast<Acc*>(smem_raw);  // [ABM][c]: cn − 2x·c
  const int tid = threadIdx.x;
  const int tx = tid % 16, ty = tid / 16;
  const int64_t row0 = int64_t(blockIdx.x) * ABM;
  if (tid < ABM) xn_s[tid] = Acc(0);
  __syncthreads();
  for (int64_t cb = 0; cb < c; cb += ABK) {
    Acc acc[4][4];
    const int64_t cvalid = (c - cb < ABK) ? c - cb : ABK;
    dist_chunk<TIn, Acc>(X, C, row0, n, cb, cvalid, d, Xs, Cs, xn_s, cb == 0, acc);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t cc = cb + tx + 16 * j;
      if (cc >= c) continue;
#pragma unroll
      for (int i = 0; i < 4; ++i) Ds[(ty + 16 * i) * c + cc] = cn[cc] - Acc(2) * acc[i][j];
    }
  }
  __syncthreads();
  const int warp = tid / 32, lane = tid % 32;
  for (int rr = warp; rr < ABM; rr += ATHREADS / 32) {
    const int64_t r = row0 + rr;
    if (r >= n) break;
    Acc* D = Ds + int64_t(rr) * c;
    const Acc xn = xn_s[rr];
    Acc dmin = pos_inf<Acc>();
    long long amin = 0;
    for (int64_t j = lane; j < c; j += 32) {
      Acc v = D[j] + xn;
      if (v <= snap * (xn + cn[j])) v = Acc(0);
      D[j] = v;
      if (better(v, j, dmin, (int64_t)amin)) { dmin = v; amin = j; }
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      const Acc ov = __shfl_xor_sync(0xffffffffu, dmin, off);
      const long long oi = __shfl_xor_sync(0xffffffffu, amin, off);
      if (better(ov, (int64_t)oi, dmin, (int64_t)amin)) { dmin = ov; amin = oi; }
    }
    Acc* u = U + r * c;
    if (dmin <= Acc(0)) {
      for (int64_t j = lane; j < c; j += 32) u[j] = (j == amin) ? Acc(1) : Acc(0);
      continue;
    }
    Acc s = Acc(0);
    for (int64_t j = lane; j < c; j += 32) {
      const Acc w = ratio_pow<Acc>(dmin / D[j], p);
      D[j] = w;
      s += w;
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    for (int64_t j = lane; j < c; j += 32) {
      const Acc v = D[j] / s;
      u[j] = v < Acc(1) ? v : Acc(1);
    }
  }
}

// Static shared memory of fcm_kernel (Xs, Cs, xn_s); the dynamic part holds ABM rows × c distances.
constexpr size_t fcm_static_bytes(size_t elem) { return (2 * size_t(ABD) * (ABM + 4) + ABM) * elem; }

inline size_t acc_size(int dtype) { return dtype == kF64 ? sizeof(double) : sizeof(float); }

template <typename TIn, typename Acc>
size_t fcm_static_bytes_runtime() {
  cudaFuncAttributes attr{};
  if (cudaFuncGetAttributes(&attr, fcm_kernel<TIn, Acc>) != cudaSuccess) {
    cudaGetLastError();
    return fcm_static_bytes(sizeof(Acc));
  }
  return attr.sharedSizeBytes;
}

template <typename TIn, typename Acc>
std::string launch_fcm(uintptr_t x, uintptr_t c, uintptr_t cn, uintptr_t u, int64_t n, int64_t nc, int64_t d,
                       double p, double snap, cudaStream_t st) {
  const size_t smem = size_t(ABM) * size_t(nc) * sizeof(Acc);
  const size_t optin = size_t(smem_optin());
  const size_t fixed = fcm_static_bytes_runtime<TIn, Acc>();
  if (optin == 0) return "fcm_memberships: no device to query (shared-memory opt-in unknown)";
  if (fixed + smem > optin)
    return "fcm_memberships: " + std::to_string(nc) + " centres need " + std::to_string(fixed + smem) +
           " bytes of shared memory, the device allows " + std::to_string(optin) + " (use fcm_max_centres)";
  cudaError_t e = cudaFuncSetAttribute(fcm_kernel<TIn, Acc>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (e != cudaSuccess) return api_error("fcm_memberships: cudaFuncSetAttribute", e);
  const int64_t blocks = (n + ABM - 1) / ABM;
  if (blocks > 2147483647LL) return "fcm_memberships: too many rows";
  fcm_kernel<TIn, Acc><<<unsigned(blocks), ATHREADS, smem, st>>>(
      reinterpret_cast<const TIn*>(x), reinterpret_cast<const TIn*>(c), reinterpret_cast<const Acc*>(cn),
      reinterpret_cast<Acc*>(u), n, nc, d, Acc(p), Acc(snap));
  return check_launch("fcm_memberships");
}

}  // namespace

std::string fcm_memberships(int dtype, uintptr_t x, uintptr_t c, uintptr_t cn, uintptr_t u, int64_t n,
                            int64_t n_centres, int64_t d, double p, double snap, uintptr_t stream) {
  if (n <= 0) return std::string();
  if (n_centres <= 0) return "fcm_memberships: n_centres must be positive";
  DeviceGuard guard(x);
  cudaStream_t st = as_stream(stream);
  switch (dtype) {
    case kF32: return launch_fcm<float, float>(x, c, cn, u, n, n_centres, d, p, snap, st);
    case kF64: return launch_fcm<double, double>(x, c, cn, u, n, n_centres, d, p, snap, st);
    case kF16: return launch_fcm<__half, float>(x, c, cn, u, n, n_centres, d, p, snap, st);
    case kBF16: return launch_fcm<__nv_bfloat16, float>(x, c, cn, u, n, n_centres, d, p, snap, st);
    default: return "fcm_memberships: unsupported dtype code " + std::to_string(dtype);
  }
}

int fcm_centres_limit(int dtype, int64_t optin_bytes) {
  const size_t elem = acc_size(dtype);
  const int64_t room = optin_bytes - int64_t(fcm_static_bytes(elem));
  return room > 0 ? int(room / int64_t(size_t(ABM) * elem)) : 0;
}

int fcm_max_centres(int dtype) {
  const size_t optin = size_t(smem_optin());
  if (optin == 0) return -1;
  size_t fixed = 0;
  switch (dtype) {
    case kF32: fixed = fcm_static_bytes_runtime<float, float>(); break;
    case kF64: fixed = fcm_static_bytes_runtime<double, double>(); break;
    case kF16: fixed = fcm_static_bytes_runtime<__half, float>(); break;
    case kBF16: fixed = fcm_static_bytes_runtime<__nv_bfloat16, float>(); break;
    default: return -1;
  }
  if (fixed >= optin) return 0;
  return int((optin - fixed) / (size_t(ABM) * acc_size(dtype)));
}

}  // namespace cuda
}  // namespace contextrag
