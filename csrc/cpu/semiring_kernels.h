// Dense semiring products on the CPU, written once and compiled per instruction set.
//
//   out[s, m] = R_g op(Bc[s, g], V[g, m])       Bc: (S, G) row-major, V: (G, M) row-major
//
//   MinSub  (Łukasiewicz up/down):  acc = min(acc, V − b)   init +inf
//   MaxAdd  (fuzzy routing):        acc = max(acc, V + b)   init −inf
//   SumMin  (meet cardinality):     acc = acc + min(V, b)   init 0
//
// This header is included by semiring_{avx512,avx2,generic}.cpp inside `#pragma GCC target(...)`
// with CR_NS naming a per-ISA namespace, so every template instantiated here gets a distinct mangled
// name: no AVX-512 code can leak into the baseline build through a shared COMDAT symbol. For the same
// reason nothing from the C++ standard library is used below (only C functions and intrinsics).
//
// Blocking: a tile of RS sets × RW vectors of output lives in registers while the kernel walks a
// chunk of GC rows of V (sized to stay in L2 together with the matching columns of Bc). Each g costs
// RW vector loads and RS broadcasts for 2·RS·RW vector ops. Rows g where every set of the tile has
// Bc = 0 are skipped: for all three ops such a term cannot change the result (see semiring.cpp).
// min and max are exact, so the order of the reduction never changes MinSub/MaxAdd results.

namespace contextrag {
namespace CR_NS {

// ---- vector traits -------------------------------------------------------------------------
#if defined(CR_ISA_AVX512)
struct F32 {
  typedef float T; typedef __m512 V; typedef __mmask16 M;
  enum { W = 16, RS = 6, RW = 4 };
  static inline V ld(const T* p) { return _mm512_loadu_ps(p); }
  static inline V ldm(const T* p, M m) { return _mm512_maskz_loadu_ps(m, p); }
  static inline void stm(T* p, M m, V v) { _mm512_mask_storeu_ps(p, m, v); }
  static inline V bc(T x) { return _mm512_set1_ps(x); }
  static inline V add(V a, V b) { return _mm512_add_ps(a, b); }
  static inline V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static inline V min(V a, V b) { return _mm512_min_ps(a, b); }
  static inline V max(V a, V b) { return _mm512_max_ps(a, b); }
  static inline M mask(int n) { return n >= W ? (M)0xFFFF : (M)((1u << n) - 1u); }
  static inline T hsum(V v) { return _mm512_reduce_add_ps(v); }
  enum { MA = 4, MB = 6 };   // meet_rows tile: 24 accumulators + 4 + 1 of 32 zmm
};
struct F64 {
  typedef double T; typedef __m512d V; typedef __mmask8 M;
  enum { W = 8, RS = 6, RW = 4 };
  static inline V ld(const T* p) { return _mm512_loadu_pd(p); }
  static inline V ldm(const T* p, M m) { return _mm512_maskz_loadu_pd(m, p); }
  static inline void stm(T* p, M m, V v) { _mm512_mask_storeu_pd(p, m, v); }
  static inline V bc(T x) { return _mm512_set1_pd(x); }
  static inline V add(V a, V b) { return _mm512_add_pd(a, b); }
  static inline V sub(V a, V b) { return _mm512_sub_pd(a, b); }
  static inline V min(V a, V b) { return _mm512_min_pd(a, b); }
  static inline V max(V a, V b) { return _mm512_max_pd(a, b); }
  static inline M mask(int n) { return n >= W ? (M)0xFF : (M)((1u << n) - 1u); }
  static inline T hsum(V v) { return _mm512_reduce_add_pd(v); }
  enum { MA = 4, MB = 6 };
};
#elif defined(CR_ISA_AVX2)
// 16 ymm registers: 4×3 accumulators + 3 loaded vectors + 1 broadcast.
struct F32 {
  typedef float T; typedef __m256 V; typedef __m256i M;
  enum { W = 8, RS = 4, RW = 3 };
  static inline V ld(const T* p) { return _mm256_loadu_ps(p); }
  static inline V ldm(const T* p, M m) { return _mm256_maskload_ps(p, m); }
  static inline void stm(T* p, M m, V v) { _mm256_maskstore_ps(p, m, v); }
  static inline V bc(T x) { return _mm256_set1_ps(x); }
  static inline V add(V a, V b) { return _mm256_add_ps(a, b); }
  static inline V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static inline V min(V a, V b) { return _mm256_min_ps(a, b); }
  static inline V max(V a, V b) { return _mm256_max_ps(a, b); }
  static inline M mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static inline T hsum(V v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));
  }
  enum { MA = 3, MB = 4 };   // 12 accumulators + 3 + 1 of 16 ymm
};
struct F64 {
  typedef double T; typedef __m256d V; typedef __m256i M;
  enum { W = 4, RS = 4, RW = 3 };
  static inline V ld(const T* p) { return _mm256_loadu_pd(p); }
  static inline V ldm(const T* p, M m) { return _mm256_maskload_pd(p, m); }
  static inline void stm(T* p, M m, V v) { _mm256_maskstore_pd(p, m, v); }
  static inline V bc(T x) { return _mm256_set1_pd(x); }
  static inline V add(V a, V b) { return _mm256_add_pd(a, b); }
  static inline V sub(V a, V b) { return _mm256_sub_pd(a, b); }
  static inline V min(V a, V b) { return _mm256_min_pd(a, b); }
  static inline V max(V a, V b) { return _mm256_max_pd(a, b); }
  static inline M mask(int n) {
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), _mm256_setr_epi64x(0, 1, 2, 3));
  }
  static inline T hsum(V v) {
    __m128d x = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(x, _mm_unpackhi_pd(x, x)));
  }
  enum { MA = 3, MB = 4 };
};
#else
// Baseline: scalar "vectors" of one lane; the compiler may still SLP-vectorize the RS×RW block.
template <class TT>
struct Scalar {
  typedef TT T; typedef TT V; typedef bool M;
  enum { W = 1, RS = 4, RW = 4 };
  static inline V ld(const T* p) { return *p; }
  static inline V ldm(const T* p, M m) { return m ? *p : T(0); }
  static inline void stm(T* p, M m, V v) { if (m) *p = v; }
  static inline V bc(T x) { return x; }
  static inline V add(V a, V b) { return a + b; }
  static inline V sub(V a, V b) { return a - b; }
  static inline V min(V a, V b) { return b < a ? b : a; }
  static inline V max(V a, V b) { return b > a ? b : a; }
  static inline M mask(int n) { return n > 0; }
  static inline T hsum(V v) { return v; }
  enum { MA = 4, MB = 4 };
};
typedef Scalar<float> F32;
typedef Scalar<double> F64;
#endif

// ---- the three semirings -------------------------------------------------------------------
struct MinSub {
  template <class VT> static inline typename VT::V step(typename VT::V acc, typename VT::V v, typename VT::V b) {
    return VT::min(acc, VT::sub(v, b));
  }
};
struct MaxAdd {
  template <class VT> static inline typename VT::V step(typename VT::V acc, typename VT::V v, typename VT::V b) {
    return VT::max(acc, VT::add(v, b));
  }
};
struct SumMin {
  template <class VT> static inline typename VT::V step(typename VT::V acc, typename VT::V v, typename VT::V b) {
    return VT::add(acc, VT::min(v, b));
  }
};

// ---- register tile ---------------------------------------------------------------------------
// acc[RS][RW] += over the rows g in [g0, g0+ng) (or the listed rows gl[0..ng) when gl != nullptr).
// `out` holds the running accumulators of this tile (read at entry, written at exit); the last of
// the RW vectors is masked to `ncols_last` lanes.
template <class VT, class Op, int RS, int RW>
static void tile(const typename VT::T* __restrict V_, ptrdiff_t ldv, const typename VT::T* __restrict B_,
                 ptrdiff_t ldb, const int* __restrict gl, ptrdiff_t g0, ptrdiff_t ng,
                 typename VT::T* __restrict out, ptrdiff_t ldo, int ncols_last) {
  typedef typename VT::V Vec;
  const typename VT::M ml = VT::mask(ncols_last);
  Vec acc[RS][RW];
#pragma GCC unroll 8
  for (int r = 0; r < RS; ++r)
#pragma GCC unroll 8
    for (int w = 0; w < RW; ++w)
      acc[r][w] = (w < RW - 1) ? VT::ld(out + r * ldo + w * VT::W) : VT::ldm(out + r * ldo + w * VT::W, ml);
  for (ptrdiff_t i = 0; i < ng; ++i) {
    const ptrdiff_t g = gl ? (ptrdiff_t)gl[i] : g0 + i;
    const typename VT::T* vr = V_ + g * ldv;
    Vec v[RW];
#pragma GCC unroll 8
    for (int w = 0; w < RW; ++w) v[w] = (w < RW - 1) ? VT::ld(vr + w * VT::W) : VT::ldm(vr + w * VT::W, ml);
#pragma GCC unroll 8
    for (int r = 0; r < RS; ++r) {
      const Vec b = VT::bc(B_[r * ldb + g]);
#pragma GCC unroll 8
      for (int w = 0; w < RW; ++w) acc[r][w] = Op::template step<VT>(acc[r][w], v[w], b);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < RS; ++r)
#pragma GCC unroll 8
    for (int w = 0; w < RW; ++w) {
      if (w < RW - 1) VT::stm(out + r * ldo + w * VT::W, VT::mask(VT::W), acc[r][w]);
      else VT::stm(out + r * ldo + w * VT::W, ml, acc[r][w]);
    }
}

template <class VT>
struct TileFn {
  typedef void (*type)(const typename VT::T*, ptrdiff_t, const typename VT::T*, ptrdiff_t, const int*,
                       ptrdiff_t, ptrdiff_t, typename VT::T*, ptrdiff_t, int);
};

// Pick tile<RS, RW> for runtime rs ∈ [1, VT::RS], rw ∈ [1, VT::RW] (both ≤ 6 and ≤ 4).
template <class VT, class Op, int RS>
static typename TileFn<VT>::type pick_rw(int rw) {
  if constexpr (RS > VT::RS) {
    return nullptr;
  } else {
    switch (rw) {
      case 1: return &tile<VT, Op, RS, 1>;
      case 2: if constexpr (VT::RW >= 2) return &tile<VT, Op, RS, 2>; else return nullptr;
      case 3: if constexpr (VT::RW >= 3) return &tile<VT, Op, RS, 3>; else return nullptr;
      case 4: if constexpr (VT::RW >= 4) return &tile<VT, Op, RS, 4>; else return nullptr;
      default: return nullptr;
    }
  }
}
template <class VT, class Op>
static typename TileFn<VT>::type pick(int rs, int rw) {
  switch (rs) {
    case 1: return pick_rw<VT, Op, 1>(rw);
    case 2: return pick_rw<VT, Op, 2>(rw);
    case 3: return pick_rw<VT, Op, 3>(rw);
    case 4: return pick_rw<VT, Op, 4>(rw);
    case 5: return pick_rw<VT, Op, 5>(rw);
    case 6: return pick_rw<VT, Op, 6>(rw);
    default: return nullptr;
  }
}

// ---- driver: L2 blocking, zero-row skipping, OpenMP over (set block, column tile) ----------
// `out` (S, M) must hold the reduction's identity on entry; it receives the raw reduction.
template <class VT, class Op>
static void run(const typename VT::T* Bc, const typename VT::T* V_, typename VT::T* out, ptrdiff_t S,
                ptrdiff_t G, ptrdiff_t M, int skip_zeros) {
  typedef typename VT::T T;
  if (S == 0 || G == 0 || M == 0) return;
  const ptrdiff_t TW = (ptrdiff_t)VT::W * VT::RW;  // widest tile, in columns
  // Column panel and row chunk: a GC×MC slab of V plus the S×GC slab of Bc fit about half of L2.
  const ptrdiff_t target = (256 * 1024) / (ptrdiff_t)sizeof(T);
  ptrdiff_t MC = M;
  if (MC * 128 > target) MC = ((target / 128) / TW > 0 ? (target / 128) / TW : 1) * TW;
  ptrdiff_t GC = target / (MC + S);
  if (GC < 32) GC = 32;
  if (GC > G) GC = G;
  const ptrdiff_t n_sblk = (S + VT::RS - 1) / VT::RS;
  // One thread below about 4M (set, g, column) triples: a query's routing (1 × 132 × 5.5k) takes
  // 0.1 ms alone, and waking a team for it cost 10 ms on a loaded 2-core machine.
#pragma omp parallel if ((double)S * (double)G * (double)M > (double)(1 << 22))
  {
    int* gl = (int*)malloc(sizeof(int) * (size_t)GC);
    for (ptrdiff_t m0 = 0; m0 < M; m0 += MC) {
      const ptrdiff_t mc = (M - m0 < MC) ? M - m0 : MC;
      // Balanced column tiles: nvec vectors split into ntile tiles of at most VT::RW vectors.
      const ptrdiff_t nvec = (mc + VT::W - 1) / VT::W;
      const ptrdiff_t ntile = (nvec + VT::RW - 1) / VT::RW;
      const ptrdiff_t per = (nvec + ntile - 1) / ntile;
      const ptrdiff_t n_items = n_sblk * ntile;
      for (ptrdiff_t g0 = 0; g0 < G; g0 += GC) {
        const ptrdiff_t gc = (G - g0 < GC) ? G - g0 : GC;
        ptrdiff_t list_sb = -1, list_n = gc;  // the set block whose zero-skip list gl holds
        // Same static split every chunk: each thread keeps its own output tiles (no races).
#pragma omp for schedule(static) nowait
        for (ptrdiff_t it = 0; it < n_items; ++it) {
          const ptrdiff_t sb = it / ntile, tb = it % ntile;
          const ptrdiff_t s0 = sb * VT::RS;
          const int rs = (int)((S - s0 < VT::RS) ? S - s0 : VT::RS);
          const ptrdiff_t v0 = tb * per;
          const ptrdiff_t v1 = (v0 + per < nvec) ? v0 + per : nvec;
          const ptrdiff_t c0 = m0 + v0 * VT::W;
          const ptrdiff_t c1 = (m0 + v1 * VT::W < m0 + mc) ? m0 + v1 * VT::W : m0 + mc;
          const int rw = (int)(v1 - v0);
          const int last = (int)((c1 - c0) - (ptrdiff_t)(rw - 1) * VT::W);
          const T* B0 = Bc + s0 * G;
          if (skip_zeros && sb != list_sb) {  // one scan per set block and chunk, shared by its tiles
            ptrdiff_t n = 0;
            for (ptrdiff_t g = g0; g < g0 + gc; ++g) {
              int nz = 0;
              for (int r = 0; r < rs; ++r) nz |= (B0[r * G + g] != T(0));
              gl[n] = (int)g;
              n += nz;
            }
            list_n = n;
            list_sb = sb;
          }
          // An indirect walk costs more than the terms it skips unless enough rows are zero.
          const bool sparse = skip_zeros && list_n * 8 < gc * 7;
          const ptrdiff_t ng = sparse ? list_n : gc;
          const int* lst = sparse ? gl : nullptr;
          if (ng == 0) continue;
          pick<VT, Op>(rs, rw)(V_ + c0, M, B0, G, lst, g0, ng, out + s0 * M + c0, M, last);
        }
      }
    }
    free(gl);
  }
}

// ---- meet cardinality on row-major operands: out[i, j] += Σ_g min(A[i, g], B[j, g]) -----------
// The lanes run along g, so neither operand is transposed (the broadcast kernel above wants Bᵀ, a
// fresh copy of B as large as the input). A tile of MA rows of A × MB rows of B keeps MA·MB vector
// accumulators over a chunk of g; each step of W g's costs MA + MB loads for 2·MA·MB vector ops.
// The lanes are summed into `out` at the end of each chunk (24 lane sums per 6,144 vector ops of a
// 2,048-float chunk on AVX-512). A tail shorter than W loads zeros, which add min(0, 0) = 0.
template <class VT, int RA, int RB>
static void meet_tile(const typename VT::T* __restrict A, const typename VT::T* __restrict B, ptrdiff_t G,
                      ptrdiff_t g0, ptrdiff_t g1, typename VT::T* __restrict out, ptrdiff_t ldo) {
  typedef typename VT::V Vec;
  if constexpr (VT::W == 1) {
    // baseline build: one pair at a time along g, a loop the compiler vectorizes with the ISA it has
    for (int r = 0; r < RA; ++r)
      for (int c = 0; c < RB; ++c) {
        const typename VT::T* a = A + r * G;
        const typename VT::T* b = B + c * G;
        typename VT::T acc = 0;
#pragma omp simd reduction(+ : acc)
        for (ptrdiff_t g = g0; g < g1; ++g) acc += b[g] < a[g] ? b[g] : a[g];
        out[r * ldo + c] += acc;
      }
    return;
  }
  Vec acc[RA][RB];
#pragma GCC unroll 8
  for (int r = 0; r < RA; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < RB; ++c) acc[r][c] = VT::bc(0);
  ptrdiff_t g = g0;
  for (; g + VT::W <= g1; g += VT::W) {
    Vec a[RA];
#pragma GCC unroll 8
    for (int r = 0; r < RA; ++r) a[r] = VT::ld(A + r * G + g);
#pragma GCC unroll 8
    for (int c = 0; c < RB; ++c) {
      const Vec b = VT::ld(B + c * G + g);
#pragma GCC unroll 8
      for (int r = 0; r < RA; ++r) acc[r][c] = VT::add(acc[r][c], VT::min(a[r], b));
    }
  }
  if (g < g1) {
    const typename VT::M m = VT::mask((int)(g1 - g));
    Vec a[RA];
#pragma GCC unroll 8
    for (int r = 0; r < RA; ++r) a[r] = VT::ldm(A + r * G + g, m);
#pragma GCC unroll 8
    for (int c = 0; c < RB; ++c) {
      const Vec b = VT::ldm(B + c * G + g, m);
#pragma GCC unroll 8
      for (int r = 0; r < RA; ++r) acc[r][c] = VT::add(acc[r][c], VT::min(a[r], b));
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < RA; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < RB; ++c) out[r * ldo + c] += VT::hsum(acc[r][c]);
}

template <class VT>
struct MeetFn {
  typedef void (*type)(const typename VT::T*, const typename VT::T*, ptrdiff_t, ptrdiff_t, ptrdiff_t,
                       typename VT::T*, ptrdiff_t);
};
template <class VT, int RA>
static typename MeetFn<VT>::type meet_pick_b(int rb) {
  switch (rb) {
    case 1: return &meet_tile<VT, RA, 1>;
    case 2: if constexpr (VT::MB >= 2) return &meet_tile<VT, RA, 2>; else return nullptr;
    case 3: if constexpr (VT::MB >= 3) return &meet_tile<VT, RA, 3>; else return nullptr;
    case 4: if constexpr (VT::MB >= 4) return &meet_tile<VT, RA, 4>; else return nullptr;
    case 5: if constexpr (VT::MB >= 5) return &meet_tile<VT, RA, 5>; else return nullptr;
    case 6: if constexpr (VT::MB >= 6) return &meet_tile<VT, RA, 6>; else return nullptr;
    default: return nullptr;
  }
}
template <class VT>
static typename MeetFn<VT>::type meet_pick(int ra, int rb) {
  switch (ra) {
    case 1: return meet_pick_b<VT, 1>(rb);
    case 2: if constexpr (VT::MA >= 2) return meet_pick_b<VT, 2>(rb); else return nullptr;
    case 3: if constexpr (VT::MA >= 3) return meet_pick_b<VT, 3>(rb); else return nullptr;
    case 4: if constexpr (VT::MA >= 4) return meet_pick_b<VT, 4>(rb); else return nullptr;
    default: return nullptr;
  }
}

// `out` (P, Q) must be zero on entry. Chunks of GC g's: the MB rows of B a tile walks stay in L1 and
// the chunk of all of B in L2 while the tiles of one block of A rows pass over it. OpenMP over the
// (A block, B block) tiles with the same static split every chunk, so each thread owns its outputs.
template <class VT>
static void meet_run(const typename VT::T* A, const typename VT::T* B, typename VT::T* out, ptrdiff_t P,
                     ptrdiff_t Q, ptrdiff_t G) {
  if (P == 0 || Q == 0 || G == 0) return;
  const ptrdiff_t GC = 2048 / (ptrdiff_t)sizeof(typename VT::T) * 4 / VT::W * VT::W;   // 8 KB of each row
  const ptrdiff_t na = (P + VT::MA - 1) / VT::MA, nb = (Q + VT::MB - 1) / VT::MB, items = na * nb;
#pragma omp parallel
  for (ptrdiff_t g0 = 0; g0 < G; g0 += GC) {
    const ptrdiff_t g1 = g0 + GC < G ? g0 + GC : G;
#pragma omp for schedule(static) nowait
    for (ptrdiff_t it = 0; it < items; ++it) {
      const ptrdiff_t i0 = (it / nb) * VT::MA, j0 = (it % nb) * VT::MB;
      const int ra = (int)(P - i0 < VT::MA ? P - i0 : VT::MA), rb = (int)(Q - j0 < VT::MB ? Q - j0 : VT::MB);
      meet_pick<VT>(ra, rb)(A + i0 * G, B + j0 * G, G, g0, g1, out + i0 * Q + j0, Q);
    }
  }
}

void meet_rows_f32(const float* A, const float* B, float* out, ptrdiff_t P, ptrdiff_t Q, ptrdiff_t G) {
  meet_run<F32>(A, B, out, P, Q, G);
}
void meet_rows_f64(const double* A, const double* B, double* out, ptrdiff_t P, ptrdiff_t Q, ptrdiff_t G) {
  meet_run<F64>(A, B, out, P, Q, G);
}

// ---- route rows --------------------------------------------------------------------------------
// out[q, i] = max(0, max_v (mu[q, v] + I[idx[i], v]) − 1) on the rows idx of an item-major I (n, V):
// the "route" epilogue for a candidate query's few percent of a million rows, read where they lie.
// Four accumulators per row break the max's dependency chain (one chain ran at a quarter of the
// vector units' rate); max is exact, so the lanes' order gives the same bits as the scalar loop.
// The rows are scattered: the next rows are prefetched while this one is reduced.
template <class VT>
static inline typename VT::T route_row(const typename VT::T* __restrict r, const typename VT::T* __restrict u,
                                       ptrdiff_t V) {
  typedef typename VT::T T;
  typedef typename VT::V Vec;
  const T ninf = -__builtin_inf();
  Vec a0 = VT::bc(ninf), a1 = a0, a2 = a0, a3 = a0;
  ptrdiff_t v = 0;
  for (; v + 4 * VT::W <= V; v += 4 * VT::W) {
    a0 = VT::max(a0, VT::add(VT::ld(r + v), VT::ld(u + v)));
    a1 = VT::max(a1, VT::add(VT::ld(r + v + VT::W), VT::ld(u + v + VT::W)));
    a2 = VT::max(a2, VT::add(VT::ld(r + v + 2 * VT::W), VT::ld(u + v + 2 * VT::W)));
    a3 = VT::max(a3, VT::add(VT::ld(r + v + 3 * VT::W), VT::ld(u + v + 3 * VT::W)));
  }
  for (; v + VT::W <= V; v += VT::W) a0 = VT::max(a0, VT::add(VT::ld(r + v), VT::ld(u + v)));
  a0 = VT::max(VT::max(a0, a1), VT::max(a2, a3));
  T lanes[VT::W];
  VT::stm(lanes, VT::mask(VT::W), a0);
  T best = lanes[0];
  for (int l = 1; l < VT::W; ++l) best = lanes[l] > best ? lanes[l] : best;
  for (; v < V; ++v) {
    const T s = r[v] + u[v];
    best = s > best ? s : best;
  }
  return best;
}

template <class VT>
static void route_rows_run(const typename VT::T* mu, const typename VT::T* I, const ptrdiff_t* idx,
                           typename VT::T* out, ptrdiff_t Q, ptrdiff_t V, ptrdiff_t m) {
  typedef typename VT::T T;
  const ptrdiff_t ahead = 4;
  const ptrdiff_t row_bytes = V * (ptrdiff_t)sizeof(T);
#pragma omp parallel for schedule(static) if (m * (V + 1) * Q >= (1 << 18))
  for (ptrdiff_t i = 0; i < m; ++i) {
    if (i + ahead < m) {
      const char* nx = (const char*)(I + idx[i + ahead] * V);
      for (ptrdiff_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(nx + b, 0, 0);
    }
    const T* r = I + idx[i] * V;
    for (ptrdiff_t q = 0; q < Q; ++q) {
      const T t = route_row<VT>(r, mu + q * V, V) - T(1);
      out[q * m + i] = t > T(0) ? t : T(0);
    }
  }
}

void route_rows_f32(const float* mu, const float* I, const ptrdiff_t* idx, float* out, ptrdiff_t Q, ptrdiff_t V,
                    ptrdiff_t m) {
  route_rows_run<F32>(mu, I, idx, out, Q, V, m);
}
void route_rows_f64(const double* mu, const double* I, const ptrdiff_t* idx, double* out, ptrdiff_t Q,
                    ptrdiff_t V, ptrdiff_t m) {
  route_rows_run<F64>(mu, I, idx, out, Q, V, m);
}

// ---- exported entry points (one per dtype; min_plus: MinSub, max_plus: MaxAdd, min_sum: SumMin) ----
void semiring_f32(SemiringMode op, const float* Bc, const float* V, float* out, ptrdiff_t S, ptrdiff_t G, ptrdiff_t M,
                  int skip_zeros) {
  if (op == SemiringMode::min_plus) run<F32, MinSub>(Bc, V, out, S, G, M, skip_zeros);
  else if (op == SemiringMode::max_plus) run<F32, MaxAdd>(Bc, V, out, S, G, M, skip_zeros);
  else run<F32, SumMin>(Bc, V, out, S, G, M, skip_zeros);
}
void semiring_f64(SemiringMode op, const double* Bc, const double* V, double* out, ptrdiff_t S, ptrdiff_t G,
                  ptrdiff_t M, int skip_zeros) {
  if (op == SemiringMode::min_plus) run<F64, MinSub>(Bc, V, out, S, G, M, skip_zeros);
  else if (op == SemiringMode::max_plus) run<F64, MaxAdd>(Bc, V, out, S, G, M, skip_zeros);
  else run<F64, SumMin>(Bc, V, out, S, G, M, skip_zeros);
}

}  // namespace CR_NS
}  // namespace contextrag
