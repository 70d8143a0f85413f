// K-means assignment (distance GEMM fused with the argmin), per-cluster sums, and FCM memberships.
//
// assign: a block owns ABM rows and walks *all* centroids of its problem, ABK at a time, and the
// feature axis ABD at a time through shared memory; each thread keeps a 4×4 register tile of x·c
// (fp32 accumulation for fp32/fp16/bf16 inputs, fp64 for fp64). After each centroid chunk the
// thread folds ‖c‖² − 2x·c into a running (distance, index) pair per row; at the end the 16 threads
// sharing a row reduce the pairs with warp shuffles, ordered by (distance, index) so ties go to the
// lowest index. Since one block sees every centroid of its rows, there is no cross-block race (no
// separate atomic-min on the distance and store of the index) and no n×k matrix in memory.
// ‖x‖² is accumulated from the staged tiles of the first centroid chunk.
// Batched RQ-KMeans: with a block table, block b works on problem blk_prob[b], rows
// [blk_row0[b], min(blk_row0[b] + ABM, prob_row1[p])), centroids prob_coff[p] .. + prob_k[p].
//
// update: per-cluster partial sums in shared memory (one block per column strip and row chunk),
// flushed to global memory with one atomic per (cluster, column) per block.
//
// fcm: the same distance tile; the block keeps its rows' distances to all c centres in shared
// memory and a warp per row runs the membership epilogue (min, ratio powers, normalisation) in one
// pass, writing each membership once.
#include "common.cuh"
#include "launch.h"

namespace contextrag {
namespace cuda {
namespace {

constexpr int ABM = 64;   // rows per block
constexpr int ABK = 64;   // centroids per chunk
constexpr int ABD = 16;   // features per shared-memory slab
constexpr int ATHREADS = 256;

struct Segment {
  const int* blk_prob;
  const int* blk_row0;
  const int* prob_row1;
  const int* prob_coff;
  const int* prob_k;
};

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

template <typename TIn, typename Acc>
__global__ void __launch_bounds__(ATHREADS)
assign_kernel(const TIn* __restrict__ X, const TIn* __restrict__ C, const Acc* __restrict__ cn,
              int64_t* __restrict__ labels, Acc* __restrict__ d2, int64_t n, int64_t k, int64_t d, Segment seg) {
  __shared__ Acc Xs[ABD][ABM + 4];
  __shared__ Acc Cs[ABD][ABK + 4];
  __shared__ Acc xn_s[ABM];
  const int tid = threadIdx.x;
  const int tx = tid % 16, ty = tid / 16;
  int64_t row0, row1, c0, kk;
  if (seg.blk_prob != nullptr) {
    const int p = seg.blk_prob[blockIdx.x];
    row0 = seg.blk_row0[blockIdx.x];
    row1 = seg.prob_row1[p];
    if (row1 > row0 + ABM) row1 = row0 + ABM;
    c0 = seg.prob_coff[p];
    kk = seg.prob_k[p];
  } else {
    row0 = int64_t(blockIdx.x) * ABM;
    row1 = n;
    c0 = 0;
    kk = k;
  }
  if (tid < ABM) xn_s[tid] = Acc(0);
  __syncthreads();
  Acc best[4];
  int64_t bidx[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) { best[i] = pos_inf<Acc>(); bidx[i] = 0; }
  for (int64_t cb = 0; cb < kk; cb += ABK) {
    Acc acc[4][4];
    const int64_t cvalid = (kk - cb < ABK) ? kk - cb : ABK;
    dist_chunk<TIn, Acc>(X, C, row0, row1, c0 + cb, cvalid, d, Xs, Cs, xn_s, cb == 0, acc);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t c = cb + tx + 16 * j;
      if (c >= kk) continue;
      const Acc cnv = cn[c0 + c];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const Acc v = cnv - Acc(2) * acc[i][j];
        if (better(v, c, best[i], bidx[i])) { best[i] = v; bidx[i] = c; }
      }
    }
  }
  // reduce over the 16 lanes (tx) that share each row; they sit in one half-warp
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    Acc v = best[i];
    long long bi = bidx[i];
#pragma unroll
    for (int off = 8; off > 0; off >>= 1) {
      const Acc ov = __shfl_xor_sync(0xffffffffu, v, off);
      const long long oi = __shfl_xor_sync(0xffffffffu, bi, off);
      if (better(ov, oi, v, bi)) { v = ov; bi = oi; }
    }
    const int64_t r = row0 + ty + 16 * i;
    if (tx == 0 && r < row1) {
      labels[r] = bi;
      const Acc dd = v + xn_s[ty + 16 * i];
      d2[r] = dd > Acc(0) ? dd : Acc(0);
    }
  }
}

// ---- update ----------------------------------------------------------------------------------
constexpr int UD = 32;  // columns per block (threadIdx.x)
constexpr int UR = 8;   // row lanes per block (threadIdx.y)

template <typename TIn, typename Acc, bool SMEM>
__global__ void __launch_bounds__(UD * UR)
update_kernel(const TIn* __restrict__ X, const int64_t* __restrict__ labels, Acc* __restrict__ sums,
              unsigned long long* __restrict__ counts, int64_t n, int64_t k, int64_t d, int64_t rows_per) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Acc* part = reinterpret_cast<Acc*>(smem_raw);
  unsigned int* cnt = reinterpret_cast<unsigned int*>(part + (SMEM ? k * UD : 0));
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * UD + tx;
  const int64_t d0 = int64_t(blockIdx.x) * UD;
  const int64_t r_lo = int64_t(blockIdx.y) * rows_per;
  const int64_t r_hi = (r_lo + rows_per < n) ? r_lo + rows_per : n;
  const bool counting = blockIdx.x == 0;
  if (SMEM) {
    for (int64_t e = tid; e < k * UD; e += UD * UR) part[e] = Acc(0);
  }
  if (counting)
    for (int64_t e = tid; e < k; e += UD * UR) cnt[e] = 0u;
  __syncthreads();
  const int64_t gd = d0 + tx;
  for (int64_t r = r_lo + ty; r < r_hi; r += UR) {
    const int64_t l = labels[r];
    if (l < 0 || l >= k) continue;  // the Python wrapper rejects these; never index shared memory with them
    if (gd < d) {
      const Acc v = cvt<Acc>(X[r * d + gd]);
      if (SMEM) atomicAdd(&part[l * UD + tx], v);
      else atomicAdd(&sums[l * d + gd], v);
    }
    if (counting && tx == 0) atomicAdd(&cnt[l], 1u);
  }
  __syncthreads();
  if (SMEM) {
    for (int64_t e = tid; e < k * UD; e += UD * UR) {
      const int64_t c = e / UD, col = d0 + e % UD;
      if (col < d && part[e] != Acc(0)) atomicAdd(&sums[c * d + col], part[e]);
    }
  }
  if (counting)
    for (int64_t e = tid; e < k; e += UD * UR)
      if (cnt[e]) atomicAdd(&counts[e], (unsigned long long)cnt[e]);
}

// ---- fcm ---------------------------------------------------------------------------------------
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

template <typename TIn, typename Acc>
std::string launch_assign(uintptr_t x, uintptr_t c, uintptr_t cn, uintptr_t lab, uintptr_t d2, int64_t n, int64_t k,
                          int64_t d, Segment seg, int64_t n_blocks, cudaStream_t st) {
  const int64_t blocks = seg.blk_prob ? n_blocks : (n + ABM - 1) / ABM;
  if (blocks <= 0) return std::string();
  if (blocks > 2147483647LL) return "kmeans_assign: too many rows";
  assign_kernel<TIn, Acc><<<unsigned(blocks), ATHREADS, 0, st>>>(
      reinterpret_cast<const TIn*>(x), reinterpret_cast<const TIn*>(c), reinterpret_cast<const Acc*>(cn),
      reinterpret_cast<int64_t*>(lab), reinterpret_cast<Acc*>(d2), n, k, d, seg);
  return check_launch("kmeans_assign");
}

template <typename TIn, typename Acc>
std::string launch_update(uintptr_t x, uintptr_t lab, uintptr_t sums, uintptr_t counts, int64_t n, int64_t k,
                          int64_t d, cudaStream_t st) {
  const int64_t col_blocks = (d + UD - 1) / UD;
  int64_t row_blocks = (4 * int64_t(sm_count()) + col_blocks - 1) / col_blocks;
  if (row_blocks < 1) row_blocks = 1;
  int64_t rows_per = (n + row_blocks - 1) / row_blocks;
  if (rows_per < 256) rows_per = 256;
  row_blocks = (n + rows_per - 1) / rows_per;
  if (row_blocks > 65535) { row_blocks = 65535; rows_per = (n + row_blocks - 1) / row_blocks; }
  const dim3 grid{unsigned(col_blocks), unsigned(row_blocks), 1u};
  const dim3 block{unsigned(UD), unsigned(UR), 1u};
  const size_t smem_sums = size_t(k) * UD * sizeof(Acc);
  const size_t smem_cnt = size_t(k) * sizeof(unsigned int);
  const auto* X = reinterpret_cast<const TIn*>(x);
  const auto* L = reinterpret_cast<const int64_t*>(lab);
  auto* S = reinterpret_cast<Acc*>(sums);
  auto* Cn = reinterpret_cast<unsigned long long*>(counts);
  if (smem_sums + smem_cnt <= 48 * 1024) {
    update_kernel<TIn, Acc, true><<<grid, block, smem_sums + smem_cnt, st>>>(X, L, S, Cn, n, k, d, rows_per);
  } else {
    if (smem_cnt > 48 * 1024) return "kmeans_update: k too large for the CUDA kernel";
    update_kernel<TIn, Acc, false><<<grid, block, smem_cnt, st>>>(X, L, S, Cn, n, k, d, rows_per);
  }
  return check_launch("kmeans_update");
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

__global__ void probe_kernel(int* out) { out[threadIdx.x] = int(threadIdx.x) + 1; }

}  // namespace

std::string kmeans_assign(int dtype, uintptr_t x, uintptr_t c, uintptr_t cn, uintptr_t labels, uintptr_t d2,
                          int64_t n, int64_t k, int64_t d, uintptr_t blk_prob, uintptr_t blk_row0,
                          uintptr_t prob_row1, uintptr_t prob_coff, uintptr_t prob_k, int64_t n_blocks,
                          uintptr_t stream) {
  if (k <= 0) return "kmeans_assign: k must be positive";
  if (dtype < kF32 || dtype > kBF16) return "kmeans_assign: unsupported dtype code " + std::to_string(dtype);
  DeviceGuard guard(x);
  Segment seg{reinterpret_cast<const int*>(blk_prob), reinterpret_cast<const int*>(blk_row0),
              reinterpret_cast<const int*>(prob_row1), reinterpret_cast<const int*>(prob_coff),
              reinterpret_cast<const int*>(prob_k)};
  cudaStream_t st = as_stream(stream);
  switch (dtype) {
    case kF32: return launch_assign<float, float>(x, c, cn, labels, d2, n, k, d, seg, n_blocks, st);
    case kF64: return launch_assign<double, double>(x, c, cn, labels, d2, n, k, d, seg, n_blocks, st);
    case kF16: return launch_assign<__half, float>(x, c, cn, labels, d2, n, k, d, seg, n_blocks, st);
    case kBF16: return launch_assign<__nv_bfloat16, float>(x, c, cn, labels, d2, n, k, d, seg, n_blocks, st);
    default: return "kmeans_assign: unsupported dtype code " + std::to_string(dtype);
  }
}

int assign_rows_per_block() { return ABM; }

std::string kmeans_update(int dtype, uintptr_t x, uintptr_t labels, uintptr_t sums, uintptr_t counts, int64_t n,
                          int64_t k, int64_t d, uintptr_t stream) {
  if (n <= 0 || d <= 0) return std::string();
  if (k <= 0) return "kmeans_update: k must be positive";
  DeviceGuard guard(x);
  cudaStream_t st = as_stream(stream);
  switch (dtype) {
    case kF32: return launch_update<float, float>(x, labels, sums, counts, n, k, d, st);
    case kF64: return launch_update<double, double>(x, labels, sums, counts, n, k, d, st);
    case kF16: return launch_update<__half, float>(x, labels, sums, counts, n, k, d, st);
    case kBF16: return launch_update<__nv_bfloat16, float>(x, labels, sums, counts, n, k, d, st);
    default: return "kmeans_update: unsupported dtype code " + std::to_string(dtype);
  }
}

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

std::string probe(int* out) {
  // out: runtime version, driver version, device, CC major, CC minor, SMs, shared-memory opt-in, launch ok
  for (int i = 0; i < 8; ++i) out[i] = -1;
  cudaError_t e = cudaRuntimeGetVersion(&out[0]);
  if (e != cudaSuccess) return api_error("cudaRuntimeGetVersion", e);
  e = cudaDriverGetVersion(&out[1]);
  if (e != cudaSuccess) return api_error("cudaDriverGetVersion", e);
  e = cudaGetDevice(&out[2]);
  if (e != cudaSuccess) return api_error("cudaGetDevice", e);
  out[3] = device_attr(cudaDevAttrComputeCapabilityMajor, -1);
  out[4] = device_attr(cudaDevAttrComputeCapabilityMinor, -1);
  out[5] = sm_count();
  out[6] = smem_optin();
  int* buf = nullptr;
  e = cudaMalloc(&buf, 32 * sizeof(int));
  if (e != cudaSuccess) return api_error("cudaMalloc", e);
  probe_kernel<<<1, 32>>>(buf);
  std::string err = check_launch("probe_kernel launch");
  int host[32] = {0};
  if (err.empty()) {
    e = cudaMemcpy(host, buf, sizeof(host), cudaMemcpyDeviceToHost);  // synchronises: reports kernel faults
    if (e != cudaSuccess) err = api_error("probe_kernel run", e);
  }
  cudaFree(buf);
  cudaGetLastError();
  if (!err.empty()) return err;
  for (int i = 0; i < 32; ++i)
    if (host[i] != i + 1) return "probe_kernel wrote wrong values";
  out[7] = 1;
  return std::string();
}

}  // namespace cuda
}  // namespace contextrag
