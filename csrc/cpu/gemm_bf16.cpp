// bf16 GEMM with fp32 accumulation and fp32 output on CPUs with AVX512-BF16 (vdpbf16ps: Zen 4,
// Sapphire Rapids and later; on AMX tiles where the CPU has them, gemm_amx.cpp), for the k-means
// distance tiles and the opt-in mixed-precision paths (fcm_fit(precision="bf16")).
// torch's CPU bf16 matmul rounds its output to bf16 (2^-9 relative), which is too coarse for
// distances and centre sums; here only the inputs are rounded, sums stay fp32.
//
//   out[i, j] = bias[j] + alpha · Σ_k A[i, k] B[k, j]
//
// Operands are packed once into bf16 (round to nearest even, NaN kept quiet):
//   A: (M, K2) uint32, each element a pair of bf16 along k (K padded to even with a zero), so one
//      32-bit broadcast feeds vdpbf16ps;
//   B: (K2, Np, 2) bf16 "pair-interleaved": Bp[p, j] = (B[2p, j], B[2p+1, j]), N padded to Np, a
//      multiple of 16, with zeros, so a 512-bit load is 16 columns × one k-pair.
// Tile: RS ≤ 8 rows × RW ≤ 3 vectors of 16 columns (24 accumulators + 3 B vectors + 1 broadcast of
// 32 zmm; rates in bench/results/cpu_fcm.json "gemm_fcm_shapes"), walking a chunk of KC pairs (the B chunk of one column tile stays in L2); OpenMP over
// (row block, column tile) per chunk. Accumulators go through `out` between chunks.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CR_BF16_X86 1
#endif

#include "gemm_amx.h"
#include "isa.h"
#include "plain_array.h"

namespace py = pybind11;

namespace contextrag {
namespace {

#include "cluster_rows_common.h"   // bf16_round, sq_dist

// One row of K floats as packed bf16 pairs (the layout of bf16_pack_a): K rounded values, then a zero
// to fill the last pair when K is odd.
inline void pack_row_bf16(const float* x, ptrdiff_t K, uint32_t* out) {
  uint16_t* h = reinterpret_cast<uint16_t*>(out);
#pragma omp simd
  for (ptrdiff_t k = 0; k < K; ++k) h[k] = bf16_round(x[k]);
  if (K % 2) h[K] = 0;
}

// Threads for a region of about `macs` multiply-adds: one per ~32M (10-20 ms of one core's bf16 rate
// would be more; a millisecond or so is the point where a second thread pays for its start-up), at
// most all. On a shared machine every parallel region ends in a barrier that waits for any
// preempted thread, so small problems run on the calling thread alone (profiled: a 5000×384×32
// fit spent 10× its arithmetic in such waits at load 6 on 2 cores).
int gemm_threads(double macs) {
  const int mx = omp_get_max_threads();
  const double nt = macs / (double)(1 << 25);
  return nt < 1.0 ? 1 : nt >= (double)mx ? mx : (int)nt;
}

// The assignment's work in multiply-add units for gemm_threads: the distance tile (k·d per row) and
// settling the row, which reads it twice more (its norms and rounding error, the exact distance to the
// chosen centre): about 22·d multiply-adds' time per row, measured (0.5 µs per 384-d row on one Xeon
// core, where the tiles themselves take a tenth of that on AMX).
double assign_work(ptrdiff_t n, ptrdiff_t k, ptrdiff_t d) { return (double)n * (double)d * (double)(k + 22); }

// Off unless the AVX-512 kernels are in use: CONTEXTRAG_ISA=avx2 (or generic) on an AVX-512 machine
// runs what an AVX2-only CPU runs.
bool bf16_supported() {
#if defined(CR_BF16_X86)
  __builtin_cpu_init();
  return cpu_isa() == Isa::avx512 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

#if defined(CR_BF16_X86)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16")

template <int RS, int RW>
void tile(const uint32_t* __restrict A, ptrdiff_t K2, const uint32_t* __restrict Bp, ptrdiff_t Np, ptrdiff_t p0,
          ptrdiff_t p1, float* __restrict out, ptrdiff_t ldo, int ncols_last, bool first, bool last, float alpha,
          const float* bias, const uint32_t* pf) {
  const __mmask16 ml = ncols_last >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << ncols_last) - 1u);
  __m512 acc[RS][RW];
#pragma GCC unroll 8
  for (int r = 0; r < RS; ++r)
#pragma GCC unroll 8
    for (int w = 0; w < RW; ++w)
      acc[r][w] = first ? _mm512_setzero_ps()
                        : _mm512_maskz_loadu_ps(w < RW - 1 ? (__mmask16)0xFFFF : ml, out + r * ldo + w * 16);
  for (ptrdiff_t p = p0; p < p1; ++p) {
    __m512bh b[RW];
    const uint32_t* br = Bp + p * Np;
    // pf: the next row block's A, fetched a cache line per row every 16 pairs while this one computes,
    // so a pass that streams A from memory (the bounded k-means' full passes) waits less on it
    if (pf && (p & 15) == 0)
#pragma GCC unroll 8
      for (int r = 0; r < RS; ++r) _mm_prefetch((const char*)(pf + r * K2 + p), _MM_HINT_T0);
#pragma GCC unroll 8
    for (int w = 0; w < RW; ++w) b[w] = (__m512bh)_mm512_loadu_si512((const void*)(br + w * 16));
#pragma GCC unroll 8
    for (int r = 0; r < RS; ++r) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32((int)A[r * K2 + p]);
#pragma GCC unroll 8
      for (int w = 0; w < RW; ++w) acc[r][w] = _mm512_dpbf16_ps(acc[r][w], a, b[w]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha);
#pragma GCC unroll 8
  for (int r = 0; r < RS; ++r)
#pragma GCC unroll 8
    for (int w = 0; w < RW; ++w) {
      const __mmask16 m = w < RW - 1 ? (__mmask16)0xFFFF : ml;
      __m512 v = acc[r][w];
      if (last) {
        v = _mm512_mul_ps(v, va);
        if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, bias + w * 16));
      }
      _mm512_mask_storeu_ps(out + r * ldo + w * 16, m, v);
    }
}

typedef void (*TileFn)(const uint32_t*, ptrdiff_t, const uint32_t*, ptrdiff_t, ptrdiff_t, ptrdiff_t, float*,
                       ptrdiff_t, int, bool, bool, float, const float*, const uint32_t*);

template <int RS>
TileFn pick_rw(int rw) {
  switch (rw) {
    case 1: return &tile<RS, 1>;
    case 2: return &tile<RS, 2>;
    case 3: return &tile<RS, 3>;
    case 4: return &tile<RS, 4>;
    case 5: return &tile<RS, 5>;
    default: return &tile<RS, 6>;
  }
}

TileFn pick(int rs, int rw) {
  switch (rs) {
    case 1: return pick_rw<1>(rw);
    case 2: return pick_rw<2>(rw);
    case 3: return pick_rw<3>(rw);
    case 4: return pick_rw<4>(rw);
    case 5: return pick_rw<5>(rw);
    case 6: return pick_rw<6>(rw);
    case 7: return pick_rw<7>(rw);
    default: return pick_rw<8>(rw);
  }
}

void gemm_run_amx(const uint32_t* A, ptrdiff_t M, ptrdiff_t K2, const uint32_t* Bp, ptrdiff_t Np, ptrdiff_t N,
                  float* out, float alpha, const float* bias);

void gemm_run(const uint32_t* A, ptrdiff_t M, ptrdiff_t K2, const uint32_t* Bp, ptrdiff_t Np, ptrdiff_t N,
              float* out, float alpha, const float* bias) {
  if (amx_active()) return gemm_run_amx(A, M, K2, Bp, Np, N, out, alpha, bias);
  constexpr int RS = 8, RWMAX = 3;   // the fastest of 2..8 × 3..6 tried on Zen 4 for both FCM shapes
  const ptrdiff_t nvec = (N + 15) / 16;
  const ptrdiff_t ntile = (nvec + RWMAX - 1) / RWMAX;
  const ptrdiff_t per = (nvec + ntile - 1) / ntile;        // balanced column tiles
  const ptrdiff_t nrb = (M + RS - 1) / RS;
  const ptrdiff_t KC = 1024;                               // pairs per chunk: B tile ≤ 1024·96·4 B
  const ptrdiff_t items = nrb * ntile;
  const int nt = gemm_threads((double)M * (double)N * (double)(2 * K2));
  for (ptrdiff_t p0 = 0; p0 < K2 || p0 == 0; p0 += KC) {
    const ptrdiff_t p1 = p0 + KC < K2 ? p0 + KC : K2;
    const bool first = p0 == 0, last = p1 >= K2;
    const bool b_in_l2 = (p1 - p0) * Np * 4 <= 512 * 1024;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (ptrdiff_t it = 0; it < items; ++it) {
      // When the chunk of B for every column tile fits in L2, column tiles go inner (a row block of
      // A is read once, from L1); otherwise row blocks go inner (one B tile stays in L2).
      const ptrdiff_t tb = b_in_l2 ? it % ntile : it / nrb, rb = b_in_l2 ? it / ntile : it % nrb;
      const ptrdiff_t r0 = rb * RS;
      const int rs = (int)(M - r0 < RS ? M - r0 : RS);
      const ptrdiff_t v0 = tb * per, v1 = v0 + per < nvec ? v0 + per : nvec;
      const int rw = (int)(v1 - v0);
      const ptrdiff_t c0 = v0 * 16;
      const int ncols_last = (int)((N < v1 * 16 ? N : v1 * 16) - (v1 - 1) * 16);
      // the first column tile of a row block prefetches the next one (the thread's next item when
      // column tiles go inner); its rows past M are not touched
      const uint32_t* pf = b_in_l2 && tb == 0 && r0 + 2 * RS <= M ? A + (r0 + RS) * K2 : nullptr;
      pick(rs, rw)(A + r0 * K2, K2, Bp + c0, Np, p0, p1, out + r0 * N + c0, N, ncols_last, first, last, alpha,
                   bias ? bias + c0 : nullptr, pf);
    }
    if (K2 == 0) break;
  }
}

// ---- k-means assignment on bf16 tiles, arg-min fused --------------------------------------------
// Per block of RS rows, one thread: the (RS, k) tile G̃ = ‖c‖² − 2 x̃·c̃ from bf16 operands goes into a
// thread-local buffer (never to memory), and each row is settled from it at once.
// The error bound, per row and per centre (x̃, c̃ the bf16 roundings, δx = x̃ − x, δc = c̃ − c):
//   x̃·c̃ − x·c = δx·c̃ + x·δc, so |x̃·c̃ − x·c| ≤ ‖δx‖‖c̃‖ + ‖x‖‖δc‖ (Cauchy–Schwarz), with the actual
//   rounding errors of this row and this centre (‖δx‖ ≈ 0.38·2⁻⁸‖x‖ on real data, against the
//   worst case 2⁻⁸‖x‖ per element that a bound from the unit roundoff alone must assume);
//   the products x̃_k c̃_k are exact in fp32 and their sum is rounded d times: ≤ γ_d ‖x̃‖‖c̃‖;
//   ‖c‖² and the final −2·acc + ‖c‖² and this test's own float arithmetic round a few more times
//   (kappa, ctau), and vdpbf16ps reads denormal inputs as zero and flushes denormal sums (rho).
// So |G̃_j − G_j| ≤ E_j = (2‖δx‖ + κ‖x̃‖)·cnorm_j + 2‖x‖·dcnorm_j + ctau_j + rho, and the nearest centre is
// j* = argmin G̃ for certain when every other j has G̃_j − E_j > G̃_j* + E_j*. Otherwise the few j that
// fail this test are compared by exact distance Σ(x − c)² in double (first index on ties): labels are
// those of exact arithmetic, which the fp32 path also gives except at rounding-level ties.
// d2_out: the exact Σ(x − c)² of the chosen centre. Returns the number of rows re-checked.
// XT: the rows' bound terms from row_terms (3 per row), or null to compute them here.
void settle_rows(const float* G, ptrdiff_t Np, ptrdiff_t k, const float* cnorm, const float* dcnorm,
                 const float* ctau, const float* X, const float* XT, const float* C, ptrdiff_t d, double kappa,
                 int rs, int64_t* lab, float* d2, ptrdiff_t* n_checked, int* cand);

template <int RS>
void assign_block(const uint32_t* A, ptrdiff_t K2, const uint32_t* Bp, ptrdiff_t Np, ptrdiff_t k, const float* cn,
                  const float* cnorm, const float* dcnorm, const float* ctau, const float* X, const float* XT,
                  const float* C, ptrdiff_t d, double kappa, int rs, float* G, int64_t* lab, float* d2,
                  ptrdiff_t* n_checked, int* cand) {
  constexpr int RWMAX = 3;
  constexpr ptrdiff_t KC = 1024;
  const ptrdiff_t nvec = (k + 15) / 16;
  for (ptrdiff_t p0 = 0; p0 < K2 || p0 == 0; p0 += KC) {
    const ptrdiff_t p1 = p0 + KC < K2 ? p0 + KC : K2;
    for (ptrdiff_t v0 = 0; v0 < nvec; v0 += RWMAX) {
      const ptrdiff_t v1 = v0 + RWMAX < nvec ? v0 + RWMAX : nvec;
      const int ncols_last = (int)((k < v1 * 16 ? k : v1 * 16) - (v1 - 1) * 16);
      pick(rs, (int)(v1 - v0))(A, K2, Bp + v0 * 16, Np, p0, p1, G + v0 * 16, Np, ncols_last, p0 == 0,
                               p1 >= K2, -2.0f, cn + v0 * 16, nullptr);
    }
    if (K2 == 0) break;
  }
  settle_rows(G, Np, k, cnorm, dcnorm, ctau, X, XT, C, d, kappa, rs, lab, d2, n_checked, cand);
}

// The first j with g[j] == v (v is the row's minimum, so one exists), 16 columns per compare.
static inline ptrdiff_t first_equal(const float* g, ptrdiff_t k, float v) {
  const __m512 vv = _mm512_set1_ps(v);
  for (ptrdiff_t j = 0; j < k; j += 16) {
    const __mmask16 m = k - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (k - j)) - 1u);
    const __mmask16 hit = _mm512_mask_cmp_ps_mask(m, _mm512_maskz_loadu_ps(m, g + j), vv, _CMP_EQ_OQ);
    if (hit) return j + __builtin_ctz((unsigned)hit);
  }
  return 0;   // not reached for a finite row; a NaN row keeps centre 0 rather than run past its end
}

// Σ (x − c)² in double, four chains of eight lanes (one chain waited on the FMA latency: the exact
// distance of the chosen centre cost as much as the rest of settling a row). The chosen centre and the
// centres the bound leaves open go through this one function, so ties compare like with like.
static inline double exact_d2(const float* x, const float* c, ptrdiff_t d) {
  __m512d acc[4] = {_mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd()};
  ptrdiff_t t = 0;
  for (; t + 32 <= d; t += 32)
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) {
      const __m512d e = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x + t + 8 * u)),
                                      _mm512_cvtps_pd(_mm256_loadu_ps(c + t + 8 * u)));
      acc[u] = _mm512_fmadd_pd(e, e, acc[u]);
    }
  for (; t < d; t += 8) {
    const __mmask8 m = d - t >= 8 ? (__mmask8)0xFF : (__mmask8)((1u << (d - t)) - 1u);
    const __m512d e = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, x + t)),
                                    _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, c + t)));
    acc[0] = _mm512_fmadd_pd(e, e, acc[0]);
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(acc[0], acc[1]), _mm512_add_pd(acc[2], acc[3])));
}

// A row's terms of the bound above, which depend on x alone: t[0] = α (the coefficient of cnorm_j),
// t[1] = β (of dcnorm_j), t[2] = ρ. A Lloyd loop computes them once per fit (bf16_row_terms), the
// same bits as settle_rows computes per call.
static inline void row_terms(const float* x, ptrdiff_t d, double kappa, float* out) {
  // ‖x‖², ‖δx‖², ‖x̃‖² in 16 float lanes, x̃ rounded here as bf16_round does (x is finite); fac covers
  // the sums' rounding; an overflow (|x| > 1.8e19) makes the bound infinite: every centre re-checked
  __m512 sxx = _mm512_setzero_ps(), see = _mm512_setzero_ps(), stt = _mm512_setzero_ps();
  const __m512i one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7fff), hi = _mm512_set1_epi32((int)0xffff0000u);
  for (ptrdiff_t t = 0; t < d; t += 16) {
    const __mmask16 m = d - t >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (d - t)) - 1u);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + t);
    const __m512i u = _mm512_castps_si512(v);
    const __m512i rb = _mm512_and_si512(_mm512_add_epi32(u, _mm512_add_epi32(half, _mm512_and_si512(_mm512_srli_epi32(u, 16), one))), hi);
    const __m512 w = _mm512_castsi512_ps(rb);
    const __m512 e = _mm512_sub_ps(w, v);   // exact (Sterbenz): w is v to 8 significant bits
    sxx = _mm512_fmadd_ps(v, v, sxx);
    see = _mm512_fmadd_ps(e, e, see);
    stt = _mm512_fmadd_ps(w, w, stt);
  }
  const double xx = _mm512_reduce_add_ps(sxx), ee = _mm512_reduce_add_ps(see), tt = _mm512_reduce_add_ps(stt);
  const double fac = 1.0 + (double)(d + 8) * 0x1p-23;
  out[0] = (float)((2.0 * sqrt(fac * ee) + kappa * sqrt(fac * tt)) * (1.0 + 0x1p-20));
  out[1] = (float)(2.0 * sqrt(fac * xx) * (1.0 + 0x1p-20));
  // rho: inputs below 2^-126 that vdpbf16ps reads as zero, partial sums it flushes (absolute terms)
  out[2] = (float)(0x1p-120 * (sqrt((double)d * fac * tt) + (double)d));
}

// Each row of a block from its G̃ row (‖c‖² − 2 x̃·c̃, row stride Np): the arg-min, the bound test, the
// exact re-check of the centres it leaves open (see above).
void settle_rows(const float* G, ptrdiff_t Np, ptrdiff_t k, const float* cnorm, const float* dcnorm,
                 const float* ctau, const float* X, const float* XT, const float* C, ptrdiff_t d, double kappa,
                 int rs, int64_t* lab, float* d2, ptrdiff_t* n_checked, int* cand) {
  for (int r = 0; r < rs; ++r) {
    const float* g = G + r * Np;
    const float* x = X + r * d;
    float gm = g[0];
#pragma omp simd reduction(min : gm)
    for (ptrdiff_t j = 0; j < k; ++j) gm = g[j] < gm ? g[j] : gm;
    ptrdiff_t a = 0;
    a = first_equal(g, k, gm);
    float own[3];
    const float* t = XT ? XT + 3 * r : own;
    if (!XT) row_terms(x, d, kappa, own);
    const float alpha = t[0], beta = t[1], rho = t[2];
    const float lim = gm + alpha * cnorm[a] + beta * dcnorm[a] + ctau[a] + 2.0f * rho;
    // count first (vectorised): most rows have one candidate, their own minimum
    int nc = 0;
    const bool finite = std::isfinite(lim) && std::isfinite(alpha) && std::isfinite(beta);
#pragma omp simd reduction(+ : nc)
    for (ptrdiff_t j = 0; j < k; ++j) nc += (g[j] - alpha * cnorm[j] - beta * dcnorm[j] - ctau[j] <= lim) ? 1 : 0;
    if (!finite) {   // an infinite bound settles nothing: every other centre is a candidate
      nc = 0;
      for (ptrdiff_t j = 0; j < k; ++j)
        if (j != a) cand[nc++] = (int)j;
    } else if (nc > 1) {
      nc = 0;
      for (ptrdiff_t j = 0; j < k; ++j)
        if (j != a && g[j] - alpha * cnorm[j] - beta * dcnorm[j] - ctau[j] <= lim) cand[nc++] = (int)j;
    } else {
      nc = 0;
    }
    double best = exact_d2(x, C + a * d, d);
    if (nc) {
      ++*n_checked;
      for (int q = 0; q < nc; ++q) {
        const ptrdiff_t j = cand[q];
        const double dj = exact_d2(x, C + j * d, d);
        if (dj < best || (dj == best && j < a)) { best = dj; a = j; }
      }
    }
    lab[r] = a;
    d2[r] = (float)best;
  }
}

int64_t assign_run_amx(const uint32_t* A, ptrdiff_t n, ptrdiff_t K2, const uint32_t* Bp, ptrdiff_t Np, ptrdiff_t k,
                       const float* cn, const float* cnorm, const float* dcnorm, const float* ctau, const float* X,
                       const float* XT, const float* C, ptrdiff_t d, double kappa, int64_t* lab, float* d2);

int64_t assign_run(const uint32_t* A, ptrdiff_t n, ptrdiff_t K2, const uint32_t* Bp, ptrdiff_t Np, ptrdiff_t k,
                   const float* cn, const float* cnorm, const float* dcnorm, const float* ctau, const float* X,
                   const float* XT, const float* C, ptrdiff_t d, double kappa, int64_t* lab, float* d2) {
  if (amx_active()) return assign_run_amx(A, n, K2, Bp, Np, k, cn, cnorm, dcnorm, ctau, X, XT, C, d, kappa, lab, d2);
  constexpr int RS = 8;
  const ptrdiff_t nrb = (n + RS - 1) / RS;
  const int nt = gemm_threads(assign_work(n, k, d));
  int64_t total = 0;
#pragma omp parallel num_threads(nt) reduction(+ : total)
  {
    float* G = (float*)aligned_alloc(64, (size_t)RS * Np * sizeof(float));
    int* cand = (int*)malloc(sizeof(int) * (size_t)(k > 0 ? k : 1));
    // A == nullptr: each block's rows are rounded to bf16 here, into this buffer (one-off assignments:
    // packing all of X first cost as much as the GEMM, most of it page faults on the fresh array)
    uint32_t* Ab = A ? nullptr : (uint32_t*)malloc(sizeof(uint32_t) * (size_t)(RS * K2 > 0 ? RS * K2 : 1));
    ptrdiff_t checked = 0;
    // dynamic: on a busy machine a preempted thread's blocks go to the others
#pragma omp for schedule(dynamic, 16)
    for (ptrdiff_t b = 0; b < nrb; ++b) {
      const ptrdiff_t r0 = b * RS;
      const int rs = (int)(n - r0 < RS ? n - r0 : RS);
      const uint32_t* Ar = A ? A + r0 * K2 : Ab;
      if (!A) {
        for (int r = 0; r < rs; ++r) pack_row_bf16(X + (r0 + r) * d, d, Ab + r * K2);
      }
      assign_block<RS>(Ar, K2, Bp, Np, k, cn, cnorm, dcnorm, ctau, X + r0 * d, XT ? XT + 3 * r0 : nullptr, C, d,
                       kappa, rs, G, lab + r0, d2 + r0, &checked, cand);
    }
    total += checked;
    free(Ab);
    free(cand);
    free(G);
  }
  return total;
}

// ---- the same products on AMX tiles (gemm_amx.cpp): blocks of AMX_ROWS rows ------------------------

// Bp with its pairs padded with zeros to a multiple of AMX_PAIRS (in buf), or Bp itself when they are.
const uint32_t* amx_padded_b(const uint32_t* Bp, ptrdiff_t K2, ptrdiff_t Np, std::vector<uint32_t>& buf) {
  const ptrdiff_t K2r = amx_pairs_padded(K2);
  if (K2r == K2) return Bp;
  buf.assign((size_t)(K2r * Np), 0u);
  if (K2 > 0) std::memcpy(buf.data(), Bp, sizeof(uint32_t) * (size_t)(K2 * Np));
  return buf.data();
}

// The block of rows r0 .. r0 + rs as amx_dots reads it: the packed rows in place when the block is
// whole and its pairs need no padding (*lda = K2), else copied into pad (AMX_ROWS × K2r, *lda = K2r)
// with zeros past the data; A == nullptr: the rows of X rounded to bf16 into pad.
const uint32_t* amx_block_rows(const uint32_t* A, const float* X, ptrdiff_t d, ptrdiff_t K2, ptrdiff_t K2r,
                               ptrdiff_t r0, int rs, uint32_t* pad, ptrdiff_t* lda) {
  if (A && rs == AMX_ROWS && K2r == K2) {
    *lda = K2;
    return A + r0 * K2;
  }
  *lda = K2r;
  for (int r = 0; r < AMX_ROWS; ++r) {
    uint32_t* pr = pad + r * K2r;
    ptrdiff_t done = 0;
    if (r < rs && A) {
      std::memcpy(pr, A + (r0 + r) * K2, sizeof(uint32_t) * (size_t)K2);
      done = K2;
    } else if (r < rs) {
      pack_row_bf16(X + (r0 + r) * d, d, pr);
      done = K2;
    }
    for (ptrdiff_t p = done; p < K2r; ++p) pr[p] = 0u;
  }
  return pad;
}

int64_t assign_run_amx(const uint32_t* A, ptrdiff_t n, ptrdiff_t K2, const uint32_t* Bp, ptrdiff_t Np, ptrdiff_t k,
                       const float* cn, const float* cnorm, const float* dcnorm, const float* ctau, const float* X,
                       const float* XT, const float* C, ptrdiff_t d, double kappa, int64_t* lab, float* d2) {
  const ptrdiff_t K2r = amx_pairs_padded(K2);
  std::vector<uint32_t> bbuf;
  const uint32_t* Bq = amx_padded_b(Bp, K2, Np, bbuf);
  const ptrdiff_t nrb = (n + AMX_ROWS - 1) / AMX_ROWS;
  const int nt = gemm_threads(assign_work(n, k, d));
  int64_t total = 0;
#pragma omp parallel num_threads(nt) reduction(+ : total)
  {
    AmxTiles amx;
    float* G = (float*)aligned_alloc(64, sizeof(float) * (size_t)(AMX_ROWS * Np));
    uint32_t* pad = (uint32_t*)aligned_alloc(64, sizeof(uint32_t) * (size_t)(AMX_ROWS * (K2r > 0 ? K2r : 16)));
    int* cand = (int*)malloc(sizeof(int) * (size_t)(k > 0 ? k : 1));
    ptrdiff_t checked = 0;
#pragma omp for schedule(dynamic, 4)
    for (ptrdiff_t b = 0; b < nrb; ++b) {
      const ptrdiff_t r0 = b * AMX_ROWS;
      const int rs = (int)(n - r0 < AMX_ROWS ? n - r0 : AMX_ROWS);
      ptrdiff_t lda;
      const uint32_t* Ar = amx_block_rows(A, X, d, K2, K2r, r0, rs, pad, &lda);
      const bool pf = A && K2r == K2 && r0 + 2 * AMX_ROWS <= n;
      amx_dots(Ar, lda, Bq, Np, K2r, G, Np, pf ? A + (r0 + AMX_ROWS) * K2 : nullptr, K2);
      for (int r = 0; r < rs; ++r) {   // G̃ = ‖c‖² − 2 x̃·c̃, as the vector tiles' epilogue (−2·acc is exact)
        float* g = G + r * Np;
#pragma omp simd
        for (ptrdiff_t j = 0; j < k; ++j) g[j] = cn[j] + -2.0f * g[j];
      }
      settle_rows(G, Np, k, cnorm, dcnorm, ctau, X + r0 * d, XT ? XT + 3 * r0 : nullptr, C, d, kappa, rs, lab + r0,
                  d2 + r0, &checked, cand);
    }
    total += checked;
    free(cand);
    free(pad);
    free(G);
  }
  return total;
}

void gemm_run_amx(const uint32_t* A, ptrdiff_t M, ptrdiff_t K2, const uint32_t* Bp, ptrdiff_t Np, ptrdiff_t N,
                  float* out, float alpha, const float* bias) {
  const ptrdiff_t K2r = amx_pairs_padded(K2);
  std::vector<uint32_t> bbuf;
  const uint32_t* Bq = amx_padded_b(Bp, K2, Np, bbuf);
  const ptrdiff_t nrb = (M + AMX_ROWS - 1) / AMX_ROWS;
  const int nt = gemm_threads((double)M * (double)N * (double)(2 * K2));
#pragma omp parallel num_threads(nt)
  {
    AmxTiles amx;
    float* G = (float*)aligned_alloc(64, sizeof(float) * (size_t)(AMX_ROWS * Np));
    uint32_t* pad = (uint32_t*)aligned_alloc(64, sizeof(uint32_t) * (size_t)(AMX_ROWS * (K2r > 0 ? K2r : 16)));
#pragma omp for schedule(static)
    for (ptrdiff_t b = 0; b < nrb; ++b) {
      const ptrdiff_t r0 = b * AMX_ROWS;
      const int rs = (int)(M - r0 < AMX_ROWS ? M - r0 : AMX_ROWS);
      ptrdiff_t lda;
      const uint32_t* Ar = amx_block_rows(A, nullptr, 0, K2, K2r, r0, rs, pad, &lda);
      const bool pf = K2r == K2 && r0 + 2 * AMX_ROWS <= M;
      amx_dots(Ar, lda, Bq, Np, K2r, G, Np, pf ? A + (r0 + AMX_ROWS) * K2 : nullptr, K2);
      for (int r = 0; r < rs; ++r) {   // as the vector tiles' epilogue: alpha·acc, then + bias
        const float* g = G + r * Np;
        float* o = out + (r0 + r) * N;
        if (bias) {
#pragma omp simd
          for (ptrdiff_t j = 0; j < N; ++j) o[j] = g[j] * alpha + bias[j];
        } else {
#pragma omp simd
          for (ptrdiff_t j = 0; j < N; ++j) o[j] = g[j] * alpha;
        }
      }
    }
    free(pad);
    free(G);
  }
}

void row_terms_run(const float* X, ptrdiff_t n, ptrdiff_t d, double kappa, float* out) {
#pragma omp parallel for schedule(static) num_threads(gemm_threads((double)n * (double)d * 4.0))
  for (ptrdiff_t i = 0; i < n; ++i) row_terms(X + i * d, d, kappa, out + 3 * i);
}

#pragma GCC pop_options
#endif

// ---- packing (plain C++, any CPU) ---------------------------------------------------------------
// bf16_pack_a(X (M, K) fp32, transpose=False) -> (M, K2) uint32 pairs; with transpose the operand
// is Xᵀ, i.e. X is (K, M).
py::array_t<uint32_t> bf16_pack_a(const py::array_t<float, py::array::c_style | py::array::forcecast>& X,
                                  bool transpose, py::object out_obj) {
  if (X.ndim() != 2) throw std::invalid_argument("X must be 2-D float32");
  const ptrdiff_t R = X.shape(0), Cc = X.shape(1);
  const ptrdiff_t M = transpose ? Cc : R, K = transpose ? R : Cc, K2 = (K + 1) / 2;
  py::array_t<uint32_t> out;
  if (out_obj.is_none()) {
    out = plain_array<uint32_t>({M, K2});
  } else {
    if (!py::isinstance<py::array_t<uint32_t>>(out_obj)) throw py::type_error("out must be a uint32 numpy array");
    out = py::reinterpret_borrow<py::array_t<uint32_t>>(out_obj);
    if (out.ndim() != 2 || out.shape(0) != M || out.shape(1) != K2 || !(out.flags() & py::array::c_style) ||
        !out.writeable())
      throw std::invalid_argument("out must be a writable C-contiguous (M, (K + 1) // 2) uint32 array");
  }
  const float* x = X.data();
  uint32_t* o = out.mutable_data();
  py::gil_scoped_release nogil;
  if (!transpose) {  // a row's pairs are its bf16 values in order (little-endian)
#pragma omp parallel for schedule(static) num_threads(gemm_threads((double)M * (double)K * 8.0))
    for (ptrdiff_t i = 0; i < M; ++i) pack_row_bf16(x + i * Cc, K, o + i * K2);
    return out;
  }
#pragma omp parallel for schedule(static) num_threads(gemm_threads((double)M * (double)K * 8.0))
  for (ptrdiff_t i = 0; i < M; ++i)
    for (ptrdiff_t p = 0; p < K2; ++p) {
      const ptrdiff_t k0 = 2 * p, k1 = 2 * p + 1;
      const float a0 = x[k0 * Cc + i];
      const float a1 = k1 < K ? x[k1 * Cc + i] : 0.0f;
      o[i * K2 + p] = (uint32_t)bf16_round(a0) | ((uint32_t)bf16_round(a1) << 16);
    }
  return out;
}

// bf16_pack_b(B (K, N) fp32, transpose=False) -> (K2, Np) uint32 pairs, Np = N rounded up to 16;
// with transpose the operand is Bᵀ, i.e. B is (N, K) (a centre matrix C for X·Cᵀ).
py::array_t<uint32_t> bf16_pack_b(const py::array_t<float, py::array::c_style | py::array::forcecast>& B,
                                  bool transpose) {
  if (B.ndim() != 2) throw std::invalid_argument("B must be 2-D float32");
  const ptrdiff_t R = B.shape(0), Cc = B.shape(1);
  const ptrdiff_t K = transpose ? Cc : R, N = transpose ? R : Cc, K2 = (K + 1) / 2, Np = (N + 15) / 16 * 16;
  py::array_t<uint32_t> out({K2, Np});
  const float* b = B.data();
  uint32_t* o = out.mutable_data();
  py::gil_scoped_release nogil;
#pragma omp parallel for schedule(static) num_threads(gemm_threads((double)K2 * (double)Np * 8.0))
  for (ptrdiff_t p = 0; p < K2; ++p)
    for (ptrdiff_t j = 0; j < Np; ++j) {
      const ptrdiff_t k0 = 2 * p, k1 = 2 * p + 1;
      float b0 = 0.0f, b1 = 0.0f;
      if (j < N) {
        b0 = transpose ? b[j * Cc + k0] : b[k0 * Cc + j];
        if (k1 < K) b1 = transpose ? b[j * Cc + k1] : b[k1 * Cc + j];
      }
      o[p * Np + j] = (uint32_t)bf16_round(b0) | ((uint32_t)bf16_round(b1) << 16);
    }
  return out;
}

// gemm_bf16(A (M, K2) uint32, Bp (K2, Np) uint32, N, out (M, N) float32, alpha=1, bias=None).
void gemm_bf16(const py::array_t<uint32_t, py::array::c_style>& A, const py::array_t<uint32_t, py::array::c_style>& Bp,
               ptrdiff_t N, py::array_t<float, py::array::c_style> out, double alpha, py::object bias_obj) {
  if (!bf16_supported()) throw std::runtime_error("gemm_bf16 needs a CPU with AVX512-BF16");
  if (A.ndim() != 2 || Bp.ndim() != 2 || out.ndim() != 2) throw std::invalid_argument("A, Bp and out must be 2-D");
  const ptrdiff_t M = A.shape(0), K2 = A.shape(1), Np = Bp.shape(1);
  if (Bp.shape(0) != K2) throw std::invalid_argument("A and Bp must have the same number of k-pairs");
  if (N < 0 || Np != (N + 15) / 16 * 16) throw std::invalid_argument("Bp must be packed for N columns");
  if (out.shape(0) != M || out.shape(1) != N) throw std::invalid_argument("out must be (M, N) float32");
  py::array_t<float, py::array::c_style | py::array::forcecast> bias;
  const float* bp = nullptr;
  if (!bias_obj.is_none()) {
    bias = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(bias_obj);
    if (!bias || bias.ndim() != 1 || bias.shape(0) != N) throw std::invalid_argument("bias must be (N,) float32");
    bp = bias.data();
  }
  if (M == 0 || N == 0) return;
#if defined(CR_BF16_X86)
  const uint32_t* a = A.data();
  const uint32_t* b = Bp.data();
  float* o = out.mutable_data();
  py::gil_scoped_release nogil;
  gemm_run(a, M, K2, b, Np, N, o, (float)alpha, bp);
#endif
}

// kmeans_assign_bf16(Xp (n, K2) uint32 or None (rows rounded per block), Cp (K2, Np) uint32, X (n, d) f32, C (k, d) f32, cn (k,) f32 = ‖c‖²,
// cnorm (k,) f32 ≥ ‖c̃‖, dcnorm (k,) f32 ≥ ‖c − c̃‖, ctau (k,) f32 (see assign_block), kappa,
// labels (n,) int64 out, d2 (n,) f32 out, XT (n, 3) f32 = bf16_row_terms(X, kappa) or None) -> rows re-checked
// exactly.
int64_t kmeans_assign_bf16(py::object Xp_obj, const py::array_t<uint32_t, py::array::c_style>& Cp,
                           const py::array_t<float, py::array::c_style>& X, const py::array_t<float, py::array::c_style>& C,
                           const py::array_t<float, py::array::c_style>& cn,
                           const py::array_t<float, py::array::c_style>& cnorm,
                           const py::array_t<float, py::array::c_style>& dcnorm,
                           const py::array_t<float, py::array::c_style>& ctau, double kappa,
                           py::array_t<int64_t, py::array::c_style> labels, py::array_t<float, py::array::c_style> d2,
                           py::object XT_obj) {
  if (!bf16_supported()) throw std::runtime_error("kmeans_assign_bf16 needs a CPU with AVX512-BF16");
  if (Cp.ndim() != 2 || X.ndim() != 2 || C.ndim() != 2) throw std::invalid_argument("Cp, X and C must be 2-D");
  const ptrdiff_t n = X.shape(0), d = X.shape(1), k = C.shape(0), K2 = (d + 1) / 2, Np = (k + 15) / 16 * 16;
  if (C.shape(1) != d) throw std::invalid_argument("C must be (k, d) with X's d");
  py::array_t<uint32_t, py::array::c_style> Xp;
  if (!Xp_obj.is_none()) {
    if (!py::isinstance<py::array_t<uint32_t>>(Xp_obj)) throw std::invalid_argument("Xp must be None or a uint32 array");
    Xp = py::array_t<uint32_t, py::array::c_style>::ensure(Xp_obj);
    if (!Xp || Xp.ndim() != 2 || Xp.shape(0) != n || Xp.shape(1) != K2)
      throw std::invalid_argument("Xp must be X packed: (n, (d + 1) // 2)");
  }
  if (Cp.shape(0) != K2 || Cp.shape(1) != Np) throw std::invalid_argument("Cp must be C packed: ((d + 1) // 2, k rounded up to 16)");
  for (const auto* v : {&cn, &cnorm, &dcnorm, &ctau})
    if (v->ndim() != 1 || v->shape(0) != k) throw std::invalid_argument("cn, cnorm, dcnorm and ctau must be (k,) float32");
  if (labels.ndim() != 1 || labels.shape(0) != n || d2.ndim() != 1 || d2.shape(0) != n)
    throw std::invalid_argument("labels and d2 must be (n,)");
  if (!(kappa >= 0.0)) throw std::invalid_argument("kappa must be >= 0");
  if (k < 1) throw std::invalid_argument("C must hold at least one centre");
  py::array_t<float, py::array::c_style> XT;
  if (!XT_obj.is_none()) {
    if (!py::isinstance<py::array_t<float>>(XT_obj)) throw std::invalid_argument("XT must be None or a float32 array");
    XT = py::array_t<float, py::array::c_style>::ensure(XT_obj);
    if (!XT || XT.ndim() != 2 || XT.shape(0) != n || XT.shape(1) != 3)
      throw std::invalid_argument("XT must be bf16_row_terms(X, kappa): (n, 3) float32");
  }
  if (n == 0) return 0;
  int64_t checked = 0;
#if defined(CR_BF16_X86)
  const uint32_t* a = Xp_obj.is_none() ? nullptr : Xp.data();
  const uint32_t* b = Cp.data();
  const float *x = X.data(), *c = C.data(), *cnp = cn.data(), *cnm = cnorm.data(), *dcn = dcnorm.data(),
              *ct = ctau.data();
  int64_t* lab = labels.mutable_data();
  float* o = d2.mutable_data();
  const float* xt = XT_obj.is_none() ? nullptr : XT.data();
  py::gil_scoped_release nogil;
  checked = assign_run(a, n, K2, b, Np, k, cnp, cnm, dcn, ct, x, xt, c, d, kappa, lab, o);
#endif
  return checked;
}

// bf16_centre_terms(C (k, d) f32) -> (‖c‖², ‖c̃‖, ‖c − c̃‖, τ = ‖c‖²·2⁻¹⁸ + 2⁻⁹⁰), each (k,) f32: the
// centre terms of the bound above (ops._bf16_bound.bf16_centre_terms is the same in NumPy), sums in
// double, the norms raised by 2⁻²⁰ before rounding so they stay upper bounds. Native because a Lloyd
// loop needs them every iteration, where NumPy's twenty small calls cost as much as a small
// assignment.
py::tuple bf16_centre_terms(const py::array_t<float, py::array::c_style | py::array::forcecast>& C) {
  if (C.ndim() != 2) throw std::invalid_argument("C must be 2-D float32");
  const ptrdiff_t k = C.shape(0), d = C.shape(1);
  py::array_t<float> cn(k), cnorm(k), dcnorm(k), ctau(k);
  const float* c = C.data();
  float *o0 = cn.mutable_data(), *o1 = cnorm.mutable_data(), *o2 = dcnorm.mutable_data(), *o3 = ctau.mutable_data();
  const double up = 1.0 + 0x1p-20;
  for (ptrdiff_t i = 0; i < k; ++i) {
    double s = 0.0, sb = 0.0, sd = 0.0;
    for (ptrdiff_t j = 0; j < d; ++j) {
      const double v = (double)c[i * d + j];
      const uint32_t bits = (uint32_t)bf16_round(c[i * d + j]) << 16;
      float bf;
      std::memcpy(&bf, &bits, 4);
      const double b = (double)bf, e = b - v;
      s += v * v;
      sb += b * b;
      sd += e * e;
    }
    o0[i] = (float)s;
    o1[i] = (float)(std::sqrt(sb) * up);
    o2[i] = (float)(std::sqrt(sd) * up);
    o3[i] = (float)(s * 0x1p-18 + 0x1p-90);
  }
  return py::make_tuple(cn, cnorm, dcnorm, ctau);
}

// bf16_row_terms(X (n, d) f32, kappa) -> (n, 3) f32: each row's terms of the bf16 bound (row_terms),
// for a Lloyd loop to pass to every kmeans_assign_bf16 of the fit instead of recomputing them.
py::array_t<float> bf16_row_terms(const py::array_t<float, py::array::c_style>& X, double kappa) {
  if (!bf16_supported()) throw std::runtime_error("bf16_row_terms needs a CPU with AVX512-BF16");
  if (X.ndim() != 2) throw std::invalid_argument("X must be 2-D float32");
  if (!(kappa >= 0.0)) throw std::invalid_argument("kappa must be >= 0");
  const ptrdiff_t n = X.shape(0), d = X.shape(1);
  py::array_t<float> out({n, (ptrdiff_t)3});
#if defined(CR_BF16_X86)
  const float* x = X.data();
  float* o = out.mutable_data();
  py::gil_scoped_release nogil;
  row_terms_run(x, n, d, kappa, o);
#endif
  return out;
}

}  // namespace

void register_gemm_bf16(py::module_& m) {
  m.def("bf16_supported", &bf16_supported, "Whether this CPU runs the AVX512-BF16 GEMM.");
  m.def("bf16_pack_a", &bf16_pack_a, py::arg("X"), py::arg("transpose") = false, py::arg("out") = py::none(),
        "Left operand X (or Xᵀ) rounded to bf16, as (M, ceil(K/2)) uint32 k-pairs.");
  m.def("bf16_pack_b", &bf16_pack_b, py::arg("B"), py::arg("transpose") = false,
        "Right operand B (or Bᵀ) rounded to bf16, pair-interleaved (ceil(K/2), N rounded up to 16) uint32.");
  m.def("gemm_bf16", &gemm_bf16, py::arg("A"), py::arg("Bp"), py::arg("N"), py::arg("out"), py::arg("alpha") = 1.0,
        py::arg("bias") = py::none(), "out = bias + alpha · A·B from packed bf16 operands, fp32 accumulation and output.");
  m.def("kmeans_assign_bf16", &kmeans_assign_bf16, py::arg("Xp"), py::arg("Cp"), py::arg("X"), py::arg("C"),
        py::arg("cn"), py::arg("cnorm"), py::arg("dcnorm"), py::arg("ctau"), py::arg("kappa"), py::arg("labels"),
        py::arg("d2"), py::arg("XT") = py::none(),
        "Nearest centre per row from bf16 distance tiles (arg-min fused, exact re-check of every row the bf16 "
        "error bound leaves open); writes labels and exact d², returns the rows re-checked. XT: "
        "bf16_row_terms(X, kappa), or None to compute them per call.");
  m.def("bf16_centre_terms", &bf16_centre_terms, py::arg("C"),
        "The bf16 bound's centre terms (‖c‖², ‖c̃‖, ‖c − c̃‖, τ), each (k,) float32.");
  m.def("bf16_row_terms", &bf16_row_terms, py::arg("X"), py::arg("kappa"),
        "Each row's terms of the bf16 distance tiles' error bound, (n, 3) float32, for kmeans_assign_bf16's XT.");
}

}  // namespace contextrag
