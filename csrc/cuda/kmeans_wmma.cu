// K-means assignment on tensor cores for bf16/fp16 X (WMMA m16n16k16, fp32 accumulation).
//
// A block owns WM = 128 rows (8 warps × 16 rows) and streams the feature axis once, 32 features
// at a time, through shared memory. Each warp keeps NF accumulator fragments (16 rows × 16·NF
// centroids, NF ≤ 8) for *all* centroids of the current chunk (k ≤ 128 is one chunk, so X is read
// from HBM exactly once for the paper's k = 96/24/12). After the feature loop a warp spills one
// fragment at a time to a private 16×16 staging tile and lanes 0–15 fold ‖c‖² − 2x·c of their row
// into a running (distance, index) pair, ties to the lowest index. One block sees every centroid of
// its rows, so there is no cross-block race and no n×k matrix. ‖x‖² is summed while staging X.
#include <mma.h>

#include "common.cuh"
#include "launch.h"

namespace contextrag {
namespace cuda {
namespace {

using namespace nvcuda;

constexpr int WM = 128;     // rows per block
constexpr int WD = 32;      // features per stage (two k16 steps)
constexpr int WLD = WD + 8; // padded leading dimension of the staged tiles (elements)
constexpr int WTHREADS = 256;
constexpr int WMAXC = 128;  // centroids per chunk

template <typename T, int NF, bool VEC>
__global__ void __launch_bounds__(WTHREADS)
assign_wmma_kernel(const T* __restrict__ X, const T* __restrict__ C, const float* __restrict__ cn,
                   int64_t* __restrict__ labels, float* __restrict__ d2, int64_t n, int64_t k, int64_t d) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // bf16 WMMA needs sm_80+; the launcher refuses older devices before getting here
#else
  __shared__ __align__(32) T Xs[WM * WLD];
  __shared__ __align__(32) T Cs[WMAXC * WLD];
  __shared__ __align__(32) float stage[8][16 * 16];
  __shared__ float xn_s[WM];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int64_t row0 = int64_t(blockIdx.x) * WM;
  if (tid < WM) xn_s[tid] = 0.f;
  float best = __int_as_float(0x7f800000);
  int64_t bidx = 0;
  __syncthreads();
  for (int64_t cb = 0; cb < k; cb += 16 * NF) {
    const int64_t cvalid = (k - cb < 16 * NF) ? k - cb : 16 * NF;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[NF];
#pragma unroll
    for (int f = 0; f < NF; ++f) wmma::fill_fragment(acc[f], 0.f);
    for (int64_t d0 = 0; d0 < d; d0 += WD) {
      // stage X rows [row0, row0+WM) × [d0, d0+WD)
      if (VEC) {
        // 8 elements (16 bytes) per load: WM*WD/8 = 512 vectors, two per thread
#pragma unroll
        for (int e = tid; e < WM * WD / 8; e += WTHREADS) {
          const int r = e / (WD / 8), c8 = (e % (WD / 8)) * 8;
          const int64_t gr = row0 + r, gd = d0 + c8;
          uint4 v = make_uint4(0u, 0u, 0u, 0u);
          if (gr < n && gd < d) v = *reinterpret_cast<const uint4*>(X + gr * d + gd);
          *reinterpret_cast<uint4*>(&Xs[r * WLD + c8]) = v;
          if (cb == 0) {
            const T* h = reinterpret_cast<const T*>(&v);
            float s = 0.f;
#pragma unroll
            for (int q = 0; q < 8; ++q) { const float f = cvt<float>(h[q]); s += f * f; }
            atomicAdd(&xn_s[r], s);
          }
        }
#pragma unroll
        for (int e = tid; e < 16 * NF * WD / 8; e += WTHREADS) {
          const int r = e / (WD / 8), c8 = (e % (WD / 8)) * 8;
          const int64_t gd = d0 + c8;
          uint4 v = make_uint4(0u, 0u, 0u, 0u);
          if (r < cvalid && gd < d) v = *reinterpret_cast<const uint4*>(C + (cb + r) * d + gd);
          *reinterpret_cast<uint4*>(&Cs[r * WLD + c8]) = v;
        }
      } else {
        for (int e = tid; e < WM * WD; e += WTHREADS) {
          const int r = e / WD, c = e % WD;
          const int64_t gr = row0 + r, gd = d0 + c;
          const T v = (gr < n && gd < d) ? X[gr * d + gd] : T(0.f);
          Xs[r * WLD + c] = v;
          if (cb == 0) { const float f = cvt<float>(v); atomicAdd(&xn_s[r], f * f); }
        }
        for (int e = tid; e < 16 * NF * WD; e += WTHREADS) {
          const int r = e / WD, c = e % WD;
          const int64_t gd = d0 + c;
          Cs[r * WLD + c] = (r < cvalid && gd < d) ? C[(cb + r) * d + gd] : T(0.f);
        }
      }
      __syncthreads();
#pragma unroll
      for (int kk = 0; kk < WD; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::load_matrix_sync(a, &Xs[(warp * 16) * WLD + kk], WLD);
#pragma unroll
        for (int f = 0; f < NF; ++f) {
          // B = Cᵀ slice (features × centroids): element (kk', n) sits at Cs[n * WLD + kk'] -> col_major
          wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> b;
          wmma::load_matrix_sync(b, &Cs[(f * 16) * WLD + kk], WLD);
          wmma::mma_sync(acc[f], a, b, acc[f]);
        }
      }
      __syncthreads();
    }
    // fold this chunk into the running (distance, index) of each row (lanes 0–15: row warp*16+lane)
#pragma unroll
    for (int f = 0; f < NF; ++f) {
      wmma::store_matrix_sync(stage[warp], acc[f], 16, wmma::mem_row_major);
      __syncwarp();
      if (lane < 16) {
#pragma unroll 4
        for (int j = 0; j < 16; ++j) {
          const int64_t c = cb + f * 16 + j;
          if (c < k) {
            const float v = cn[c] - 2.f * stage[warp][lane * 16 + j];
            if (v < best) { best = v; bidx = c; }  // ascending c: strict < keeps the lowest index
          }
        }
      }
      __syncwarp();
    }
  }
  if (lane < 16) {
    const int64_t r = row0 + warp * 16 + lane;
    if (r < n) {
      labels[r] = bidx;
      const float v = best + xn_s[warp * 16 + lane];
      d2[r] = v > 0.f ? v : 0.f;
    }
  }
#endif
}

template <typename T, int NF>
std::string launch_nf(const T* X, const T* C, const float* cn, int64_t* lab, float* d2, int64_t n, int64_t k,
                      int64_t d, bool vec, cudaStream_t st) {
  const int64_t blocks = (n + WM - 1) / WM;
  if (vec)
    assign_wmma_kernel<T, NF, true><<<unsigned(blocks), WTHREADS, 0, st>>>(X, C, cn, lab, d2, n, k, d);
  else
    assign_wmma_kernel<T, NF, false><<<unsigned(blocks), WTHREADS, 0, st>>>(X, C, cn, lab, d2, n, k, d);
  return check_launch("kmeans_assign_wmma");
}

template <typename T>
std::string launch_t(uintptr_t x, uintptr_t c, uintptr_t cn, uintptr_t lab, uintptr_t d2, int64_t n, int64_t k,
                     int64_t d, cudaStream_t st) {
  const T* X = reinterpret_cast<const T*>(x);
  const T* Cp = reinterpret_cast<const T*>(c);
  const bool vec = (d % 8 == 0) && (x % 16 == 0) && (c % 16 == 0);
  const int64_t chunk = k < WMAXC ? k : WMAXC;
  const int nf = int((chunk + 15) / 16);
  auto* CN = reinterpret_cast<const float*>(cn);
  auto* L = reinterpret_cast<int64_t*>(lab);
  auto* D2 = reinterpret_cast<float*>(d2);
  switch (nf) {
    case 1: return launch_nf<T, 1>(X, Cp, CN, L, D2, n, k, d, vec, st);
    case 2: return launch_nf<T, 2>(X, Cp, CN, L, D2, n, k, d, vec, st);
    case 3: return launch_nf<T, 3>(X, Cp, CN, L, D2, n, k, d, vec, st);
    case 4: return launch_nf<T, 4>(X, Cp, CN, L, D2, n, k, d, vec, st);
    case 5: return launch_nf<T, 5>(X, Cp, CN, L, D2, n, k, d, vec, st);
    case 6: return launch_nf<T, 6>(X, Cp, CN, L, D2, n, k, d, vec, st);
    case 7: return launch_nf<T, 7>(X, Cp, CN, L, D2, n, k, d, vec, st);
    default: return launch_nf<T, 8>(X, Cp, CN, L, D2, n, k, d, vec, st);
  }
}

}  // namespace

std::string kmeans_assign_tc(int dtype, uintptr_t x, uintptr_t c, uintptr_t cn, uintptr_t labels, uintptr_t d2,
                             int64_t n, int64_t k, int64_t d, uintptr_t stream) {
  if (k <= 0) return "kmeans_assign_tc: k must be positive";
  if (n <= 0) return std::string();
  if ((n + WM - 1) / WM > 2147483647LL) return "kmeans_assign_tc: too many rows";
  if (dtype != kBF16 && dtype != kF16) return "kmeans_assign_tc: tensor-core path takes float16 or bfloat16 X";
  DeviceGuard guard(x);
  // an unqueryable device (error cleared) falls through to the launch, which reports it
  const int major = device_attr(cudaDevAttrComputeCapabilityMajor, 8);
  if (major < 8) return "kmeans_assign_tc: tensor-core path needs compute capability 8.0 or newer";
  cudaStream_t st = as_stream(stream);
  if (dtype == kBF16) return launch_t<__nv_bfloat16>(x, c, cn, labels, d2, n, k, d, st);
  if (dtype == kF16) return launch_t<__half>(x, c, cn, labels, d2, n, k, d, st);
  return "kmeans_assign_tc: tensor-core path takes float16 or bfloat16 X";
}

}  // namespace cuda
}  // namespace contextrag
