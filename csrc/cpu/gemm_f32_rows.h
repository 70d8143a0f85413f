// The fp32 distance-tile microkernel, written once and compiled per instruction set
// (cluster_rows_{avx512,avx2,generic}.cpp) inside `#pragma GCC target(...)` with CR_NS naming a
// per-ISA namespace and CR_F32_VW the vector width in floats (16: AVX-512, 8: AVX2 + FMA, 0: plain
// C++ for the compiler to vectorise). Only C functions and intrinsics, as in elkan_rows.h.
//
//   f32_dot_block: G[r, j] = Σ_p A[r, p] · Bp[p, j] for rs ≤ 8 rows of A (row stride lda) and all
//   Np columns of Bp (K, Np) (a centre matrix transposed and zero-padded to Np, a multiple of 16).
//
// Register tiles: AVX-512 8 rows × 3 vectors (24 accumulators of 32 zmm), AVX2 4 × 3 (12 of 16 ymm,
// the broadcast and the 3 B vectors fill the rest). The whole K runs in registers (a (K, 48) B tile
// is 72 KiB at K = 384: it stays in L2 and is reused by every row block), so G is written once.
// gemm_f32.cpp owns the threads, the row blocks and the epilogues.

namespace contextrag {
namespace CR_NS {

#if CR_F32_VW == 16
typedef __m512 f32v;
static inline f32v f32v_zero() { return _mm512_setzero_ps(); }
static inline f32v f32v_load(const float* p) { return _mm512_loadu_ps(p); }
static inline f32v f32v_set1(float a) { return _mm512_set1_ps(a); }
static inline f32v f32v_fma(f32v a, f32v b, f32v c) { return _mm512_fmadd_ps(a, b, c); }
static inline void f32v_store(float* p, f32v v) { _mm512_storeu_ps(p, v); }
#define CR_F32_RS 8
#elif CR_F32_VW == 8
typedef __m256 f32v;
static inline f32v f32v_zero() { return _mm256_setzero_ps(); }
static inline f32v f32v_load(const float* p) { return _mm256_loadu_ps(p); }
static inline f32v f32v_set1(float a) { return _mm256_set1_ps(a); }
static inline f32v f32v_fma(f32v a, f32v b, f32v c) { return _mm256_fmadd_ps(a, b, c); }
static inline void f32v_store(float* p, f32v v) { _mm256_storeu_ps(p, v); }
#define CR_F32_RS 4
#endif

#if CR_F32_VW > 0
template <int RS, int RW>
static void f32_tile(const float* __restrict A, ptrdiff_t lda, const float* __restrict Bp, ptrdiff_t Np,
                     ptrdiff_t K, float* __restrict G) {
  f32v acc[RS][RW];
#pragma GCC unroll 8
  for (int r = 0; r < RS; ++r)
#pragma GCC unroll 8
    for (int w = 0; w < RW; ++w) acc[r][w] = f32v_zero();
  for (ptrdiff_t p = 0; p < K; ++p) {
    f32v b[RW];
    const float* br = Bp + p * Np;
#pragma GCC unroll 8
    for (int w = 0; w < RW; ++w) b[w] = f32v_load(br + w * CR_F32_VW);
#pragma GCC unroll 8
    for (int r = 0; r < RS; ++r) {
      const f32v a = f32v_set1(A[r * lda + p]);
#pragma GCC unroll 8
      for (int w = 0; w < RW; ++w) acc[r][w] = f32v_fma(a, b[w], acc[r][w]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < RS; ++r)
#pragma GCC unroll 8
    for (int w = 0; w < RW; ++w) f32v_store(G + r * Np + w * CR_F32_VW, acc[r][w]);
}

typedef void (*F32TileFn)(const float*, ptrdiff_t, const float*, ptrdiff_t, ptrdiff_t, float*);

template <int RS>
static F32TileFn f32_pick_rw(int rw) {
  switch (rw) {
    case 1: return &f32_tile<RS, 1>;
    case 2: return &f32_tile<RS, 2>;
    default: return &f32_tile<RS, 3>;
  }
}

static F32TileFn f32_pick(int rs, int rw) {
  switch (rs) {
    case 1: return f32_pick_rw<1>(rw);
    case 2: return f32_pick_rw<2>(rw);
    case 3: return f32_pick_rw<3>(rw);
#if CR_F32_RS > 4
    case 4: return f32_pick_rw<4>(rw);
    case 5: return f32_pick_rw<5>(rw);
    case 6: return f32_pick_rw<6>(rw);
    case 7: return f32_pick_rw<7>(rw);
#endif
    default: return f32_pick_rw<CR_F32_RS>(rw);
  }
}

void f32_dot_block(const float* A, ptrdiff_t lda, int rs, const float* Bp, ptrdiff_t Np, ptrdiff_t K, float* G) {
  const ptrdiff_t nvec = Np / CR_F32_VW;
  for (int r0 = 0; r0 < rs; r0 += CR_F32_RS) {
    const int rr = rs - r0 < CR_F32_RS ? rs - r0 : CR_F32_RS;
    for (ptrdiff_t v0 = 0; v0 < nvec; v0 += 3) {
      const int rw = (int)(nvec - v0 < 3 ? nvec - v0 : 3);
      f32_pick(rr, rw)(A + r0 * lda, lda, Bp + v0 * CR_F32_VW, Np, K, G + r0 * Np + v0 * CR_F32_VW);
    }
  }
}
#else
// Any CPU: 16 columns at a time in a local block the compiler keeps in vector registers.
void f32_dot_block(const float* A, ptrdiff_t lda, int rs, const float* Bp, ptrdiff_t Np, ptrdiff_t K, float* G) {
  for (int r = 0; r < rs; ++r)
    for (ptrdiff_t c0 = 0; c0 < Np; c0 += 16) {
      float acc[16] = {0};
      for (ptrdiff_t p = 0; p < K; ++p) {
        const float a = A[r * lda + p];
        const float* br = Bp + p * Np + c0;
#pragma omp simd
        for (int l = 0; l < 16; ++l) acc[l] += a * br[l];
      }
      for (int l = 0; l < 16; ++l) G[r * Np + c0 + l] = acc[l];
    }
}
#endif

}  // namespace CR_NS
}  // namespace contextrag
