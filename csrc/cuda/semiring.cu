// Semiring products on CUDA cores, register-blocked like an SGEMM with (+, ×) replaced:
//   SemiringMode::min_plus : out = min(1, 1 + min_k (B[k,n] − A[m,k]))   Łukasiewicz A↑ / B↓ (eq. 6–7)
//   SemiringMode::max_plus : out = max(0, max_k (A[m,k] + B[k,n]) − 1)   fuzzy routing (eq. 16)
//   SemiringMode::min_sum  : out = Σ_k min(A[m,k], B[k,n])               meet cardinality
// A block computes a BM×BN output tile (128×128, or 66×66 where that pads less: the index's
// 132-wide sets); each thread keeps TM×TN accumulators in registers and,
// per reduction step, reads TM values of A and TN of B from shared memory (TM+TN loads for TM·TN
// terms). Operands are read through arbitrary strides (transposed views are free); the global→shared
// staging picks the coalesced order from whichever stride is 1. The Łukasiewicz clamp is applied
// once, after the full reduction. Small outputs with long reductions (132×132 over a million chunks)
// split the reduction over gridDim.z into a workspace that a second kernel folds (min/max exactly,
// sums in split order) before the epilogue.
#include "common.cuh"
#include "launch.h"
#include "semiring_mode.h"

namespace contextrag {
namespace cuda {
namespace {

template <typename T, SemiringMode OP>
struct Semiring;

template <typename T>
struct Semiring<T, SemiringMode::min_plus> {  // min-plus on (B − A)
  static __device__ __forceinline__ T init() { return pos_inf<T>(); }
  static __device__ __forceinline__ T pad_a() { return T(0); }
  static __device__ __forceinline__ T pad_b() { return pos_inf<T>(); }
  static __device__ __forceinline__ T step(T acc, T a, T b) { return acc < b - a ? acc : b - a; }
  static __device__ __forceinline__ T fold(T x, T y) { return x < y ? x : y; }
  static __device__ __forceinline__ T epilogue(T x) { x = x + T(1); return x < T(1) ? x : T(1); }
};

template <typename T>
struct Semiring<T, SemiringMode::max_plus> {  // max-plus
  static __device__ __forceinline__ T init() { return -pos_inf<T>(); }
  static __device__ __forceinline__ T pad_a() { return -pos_inf<T>(); }
  static __device__ __forceinline__ T pad_b() { return -pos_inf<T>(); }
  static __device__ __forceinline__ T step(T acc, T a, T b) { T t = a + b; return acc > t ? acc : t; }
  static __device__ __forceinline__ T fold(T x, T y) { return x > y ? x : y; }
  static __device__ __forceinline__ T epilogue(T x) { x = x - T(1); return x > T(0) ? x : T(0); }
};

template <typename T>
struct Semiring<T, SemiringMode::min_sum> {  // min-sum
  static __device__ __forceinline__ T init() { return T(0); }
  static __device__ __forceinline__ T pad_a() { return T(0); }
  static __device__ __forceinline__ T pad_b() { return T(0); }
  static __device__ __forceinline__ T step(T acc, T a, T b) { return acc + (a < b ? a : b); }
  static __device__ __forceinline__ T fold(T x, T y) { return x + y; }
  static __device__ __forceinline__ T epilogue(T x) { return x; }
};

template <typename T, SemiringMode OP, int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
semiring_kernel(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ out, int64_t M, int64_t N,
                int64_t K, int64_t kps, int64_t s_am, int64_t s_ak, int64_t s_bk, int64_t s_bn, int64_t s_os,
                bool epilogue) {
  using S = Semiring<T, OP>;
  constexpr int TX = BN / TN;            // threads along n
  constexpr int TY = BM / TM;            // threads along m
  constexpr int NT = TX * TY;
  constexpr int PAD = 4;                 // keeps the transposing stores conflict-free
  __shared__ T As[BK][BM + PAD];
  __shared__ T Bs[BK][BN + PAD];
  const int tid = threadIdx.x;
  const int tx = tid % TX, ty = tid / TX;
  const int64_t m0 = int64_t(blockIdx.y) * BM, n0 = int64_t(blockIdx.x) * BN;
  const int64_t klo = int64_t(blockIdx.z) * kps;
  const int64_t khi = (klo + kps < K) ? klo + kps : K;

  T acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = S::init();

  const bool a_krow = (s_ak == 1);       // A rows contiguous along k: walk k fastest
  const bool b_nrow = (s_bn == 1) || (s_bk != 1);
  for (int64_t k0 = klo; k0 < khi; k0 += BK) {
#pragma unroll
    for (int e = tid; e < BM * BK; e += NT) {
      int mm, kk;
      if (a_krow) { mm = e / BK; kk = e % BK; } else { mm = e % BM; kk = e / BM; }
      const int64_t gm = m0 + mm, gk = k0 + kk;
      As[kk][mm] = (gm < M && gk < khi) ? A[gm * s_am + gk * s_ak] : S::pad_a();
    }
#pragma unroll
    for (int e = tid; e < BN * BK; e += NT) {
      int nn, kk;
      if (b_nrow) { nn = e % BN; kk = e / BN; } else { kk = e % BK; nn = e / BK; }
      const int64_t gn = n0 + nn, gk = k0 + kk;
      Bs[kk][nn] = (gn < N && gk < khi) ? B[gk * s_bk + gn * s_bn] : S::pad_b();
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      T a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = As[kk][ty + i * TY];
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = Bs[kk][tx + j * TX];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = S::step(acc[i][j], a[i], b[j]);
    }
    __syncthreads();
  }
  T* o = out + int64_t(blockIdx.z) * s_os;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int64_t gm = m0 + ty + i * TY;
    if (gm >= M) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int64_t gn = n0 + tx + j * TX;
      if (gn < N) o[gm * N + gn] = epilogue ? S::epilogue(acc[i][j]) : acc[i][j];
    }
  }
}

template <typename T, SemiringMode OP>
__global__ void fold_splits(const T* __restrict__ ws, T* __restrict__ out, int64_t MN, int split) {
  using S = Semiring<T, OP>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < MN; i += int64_t(gridDim.x) * blockDim.x) {
    T v = ws[i];
    for (int s = 1; s < split; ++s) v = S::fold(v, ws[int64_t(s) * MN + i]);
    out[i] = S::epilogue(v);
  }
}

// Tile shapes. Big: 128×128, 8×8 per thread (16 shared loads per 64 terms). Small: 66×66, 6×6 per
// thread on 121 threads, for the index's 132-wide sets: 132 = 2·66 pads nothing, where 128-tiles
// would compute 256 rows or columns for 132 (up to 3.8× the useful work for a 132×132 output).
struct BigF { static constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8; };
struct SmallF { static constexpr int BM = 66, BN = 66, BK = 8, TM = 6, TN = 6; };
struct BigD { static constexpr int BM = 64, BN = 64, BK = 8, TM = 4, TN = 4; };

inline int64_t padded(int64_t x, int64_t b) { return ((x + b - 1) / b) * b; }

// 1 when the small tiles do less than 80% of the big tiles' (padded) work, else 0.
inline int pick_float_tile(int64_t M, int64_t N) {
  const double big = double(padded(M, BigF::BM)) * double(padded(N, BigF::BN));
  const double small = double(padded(M, SmallF::BM)) * double(padded(N, SmallF::BN));
  return small < 0.8 * big ? 1 : 0;
}

template <typename T, SemiringMode OP, typename TL>
std::string run(const T* A, const T* B, T* out, int64_t M, int64_t N, int64_t K, int64_t s_am, int64_t s_ak,
                int64_t s_bk, int64_t s_bn, int split, T* ws, cudaStream_t st) {
  constexpr int threads = (TL::BM / TL::TM) * (TL::BN / TL::TN);
  if (split < 1) split = 1;
  int64_t kps = (K + split - 1) / split;
  kps = ((kps + TL::BK - 1) / TL::BK) * TL::BK;
  split = int((K + kps - 1) / kps);
  const int64_t gy = (M + TL::BM - 1) / TL::BM;
  if (gy > 65535) return "semiring: too many rows for one launch (M > 65535*" + std::to_string(TL::BM) + ")";
  dim3 grid(unsigned((N + TL::BN - 1) / TL::BN), unsigned(gy), unsigned(split));
  if (split == 1) {
    semiring_kernel<T, OP, TL::BM, TL::BN, TL::BK, TL::TM, TL::TN>
        <<<grid, threads, 0, st>>>(A, B, out, M, N, K, kps, s_am, s_ak, s_bk, s_bn, 0, true);
    return check_launch("semiring_kernel");
  }
  semiring_kernel<T, OP, TL::BM, TL::BN, TL::BK, TL::TM, TL::TN>
      <<<grid, threads, 0, st>>>(A, B, ws, M, N, K, kps, s_am, s_ak, s_bk, s_bn, M * N, false);
  std::string err = check_launch("semiring_kernel(split)");
  if (!err.empty()) return err;
  const int64_t MN = M * N;
  int blocks = int((MN + 255) / 256);
  if (blocks > 4096) blocks = 4096;
  fold_splits<T, OP><<<blocks, 256, 0, st>>>(ws, out, MN, split);
  return check_launch("fold_splits");
}

template <typename T, SemiringMode OP>
std::string run_tiles(const T* A, const T* B, T* out, int64_t M, int64_t N, int64_t K, int64_t s_am, int64_t s_ak,
                      int64_t s_bk, int64_t s_bn, int split, T* ws, cudaStream_t st) {
  if constexpr (sizeof(T) == 8) {
    return run<T, OP, BigD>(A, B, out, M, N, K, s_am, s_ak, s_bk, s_bn, split, ws, st);
  } else {
    if (pick_float_tile(M, N) == 1)
      return run<T, OP, SmallF>(A, B, out, M, N, K, s_am, s_ak, s_bk, s_bn, split, ws, st);
    return run<T, OP, BigF>(A, B, out, M, N, K, s_am, s_ak, s_bk, s_bn, split, ws, st);
  }
}

template <typename T>
std::string run_op(SemiringMode op, uintptr_t a, uintptr_t b, uintptr_t out, int64_t M, int64_t N, int64_t K, int64_t s_am,
                   int64_t s_ak, int64_t s_bk, int64_t s_bn, int split, uintptr_t ws, cudaStream_t st) {
  const T* A = reinterpret_cast<const T*>(a);
  const T* B = reinterpret_cast<const T*>(b);
  T* O = reinterpret_cast<T*>(out);
  T* W = reinterpret_cast<T*>(ws);
  switch (op) {
    case SemiringMode::min_plus: return run_tiles<T, SemiringMode::min_plus>(A, B, O, M, N, K, s_am, s_ak, s_bk, s_bn, split, W, st);
    case SemiringMode::max_plus: return run_tiles<T, SemiringMode::max_plus>(A, B, O, M, N, K, s_am, s_ak, s_bk, s_bn, split, W, st);
    case SemiringMode::min_sum: return run_tiles<T, SemiringMode::min_sum>(A, B, O, M, N, K, s_am, s_ak, s_bk, s_bn, split, W, st);
    default: return "semiring: unknown SemiringMode " + std::to_string(int(op));
  }
}

}  // namespace

std::string semiring(SemiringMode op, int dtype, uintptr_t a, uintptr_t b, uintptr_t out, int64_t M, int64_t N, int64_t K,
                     int64_t s_am, int64_t s_ak, int64_t s_bk, int64_t s_bn, int split, uintptr_t ws,
                     uintptr_t stream) {
  if (M <= 0 || N <= 0 || K <= 0) return "semiring: M, N and K must be positive";
  if (split > 1 && ws == 0) return "semiring: split > 1 needs a workspace of split*M*N elements";
  if (split > 65535) return "semiring: split must be at most 65535 (grid axis z)";
  if (dtype != kF32 && dtype != kF64) return "semiring: dtype must be float32 or float64";
  DeviceGuard guard(out);
  cudaStream_t st = as_stream(stream);
  if (dtype == kF32) return run_op<float>(op, a, b, out, M, N, K, s_am, s_ak, s_bk, s_bn, split, ws, st);
  if (dtype == kF64) return run_op<double>(op, a, b, out, M, N, K, s_am, s_ak, s_bk, s_bn, split, ws, st);
  return "semiring: dtype must be float32 or float64";
}

int semiring_default_split(int64_t M, int64_t N, int64_t K, int sms) {
  const int64_t bm = pick_float_tile(M, N) ? SmallF::BM : BigF::BM;
  const int64_t bn = pick_float_tile(M, N) ? SmallF::BN : BigF::BN;
  const int64_t tiles = ((M + bm - 1) / bm) * ((N + bn - 1) / bn);
  const int64_t target = 2 * int64_t(sms > 0 ? sms : 1);
  int64_t split = (target + tiles - 1) / tiles;
  const int64_t max_split = (K + 511) / 512;  // at least 512 reduction steps per split
  if (split > max_split) split = max_split;
  if (split < 1) split = 1;
  if (split > 1024) split = 1024;
  return int(split);
}

}  // namespace cuda
}  // namespace contextrag
