// The distance tile shared by the k-means assignment and the FCM memberships (kmeans.cu, fcm.cu):
// a block of ABM rows × ABK centroids, the feature axis staged ABD at a time through shared memory.
#pragma once
#include "common.cuh"

namespace contextrag {
namespace cuda {
namespace tile {

constexpr int ABM = 64;   // rows per block
constexpr int ABK = 64;   // centroids per chunk
constexpr int ABD = 16;   // features per shared-memory slab
constexpr int ATHREADS = 256;

// Accumulate acc[i][j] = x[row ty+16i] · c[cb + tx + 16j] over all d for one centroid chunk.
template <typename TIn, typename Acc>
__device__ __forceinline__ void dist_chunk(const TIn* __restrict__ X, const TIn* __restrict__ C, int64_t row0,
                                           int64_t row1, int64_t cglob0, int64_t cvalid, int64_t d,
                                           Acc (&Xs)[ABD][ABM + 4], Acc (&Cs)[ABD][ABK + 4], Acc* xn_s,
                                           bool want_xn, Acc (&acc)[4][4]) {
  const int tid = threadIdx.x;
  const int tx = tid % 16, ty = tid / 16;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = Acc(0);
  for (int64_t d0 = 0; d0 < d; d0 += ABD) {
#pragma unroll
    for (int e = tid; e < ABM * ABD; e += ATHREADS) {
      const int mm = e / ABD, dd = e % ABD;
      const int64_t gm = row0 + mm, gd = d0 + dd;
      const Acc v = (gm < row1 && gd < d) ? cvt<Acc>(X[gm * d + gd]) : Acc(0);
      Xs[dd][mm] = v;
      if (want_xn) atomicAdd(&xn_s[mm], v * v);
    }
#pragma unroll
    for (int e = tid; e < ABK * ABD; e += ATHREADS) {
      const int cc = e / ABD, dd = e % ABD;
      const int64_t gd = d0 + dd;
      Cs[dd][cc] = (cc < cvalid && gd < d) ? cvt<Acc>(C[(cglob0 + cc) * d + gd]) : Acc(0);
    }
    __syncthreads();
#pragma unroll
    for (int dd = 0; dd < ABD; ++dd) {
      Acc a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = Xs[dd][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = Cs[dd][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
}

template <typename Acc>
__device__ __forceinline__ bool better(Acc v, int64_t i, Acc bv, int64_t bi) {
  return v < bv || (v == bv && i < bi);
}

}  // namespace tile
}  // namespace cuda
}  // namespace contextrag
