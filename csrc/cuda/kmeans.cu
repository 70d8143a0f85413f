// K-means assignment (distance GEMM fused with the argmin) and per-cluster sums.
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
#include "distance_tile.cuh"
#include "launch.h"

namespace contextrag {
namespace cuda {
namespace {

using namespace tile;

struct Segment {
  const int* blk_prob;
  const int* blk_row0;
  const int* prob_row1;
  const int* prob_coff;
  const int* prob_k;
};

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
  // d = 0 still launches one column block: it counts the labels (its sums loop has nothing to add)
  const int64_t col_blocks = d > 0 ? (d + UD - 1) / UD : 1;
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
  if (n <= 0) return std::string();
  if (k <= 0) return "kmeans_update: k must be positive";
  if (d < 0) return "kmeans_update: d must be non-negative";
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
