// The transformer encoder's row kernels, written once and compiled per instruction set
// (encoder_{avx512,avx2,generic}.cpp) inside `#pragma GCC target(...)` with CR_NS naming a per-ISA
// namespace. As in semiring_kernels.h only C functions are used, so no AVX-512 code can reach the
// baseline build through a shared COMDAT symbol. Activations cross in bf16 bits (what the bf16 GEMMs
// read and write); all arithmetic is fp32.
//
// attention_bf16: softmax(q·kᵀ·scale) v for every head of every sequence, over the first len[b]
// tokens only (the keys past a sequence's length are padding; its padded query rows get zeros). One
// sequence per task: its token rows are unpacked once into every head's operands. In fp32 on the
// vector units, the keys transposed so that a block of 16 keys' scores is a run of broadcast
// multiply-adds kept in registers, four query rows at a time; or, where the AVX-512 build runs on AMX,
// as two bf16 tile products per block of 32 query rows (attention_head_amx).
//
// add_layer_norm_bf16: h ← LayerNorm(h + y + bias) in place (fp32 residual stream, y the bf16
// output of the layer's last GEMM) and its bf16 copy for the next GEMM, in one pass over the row.
//
// bias_gelu_bf16: the feed-forward's GELU(y + bias) in place on the bf16 GEMM output.
//
// The GEMMs run without their bias (a GEMM with one broadcasts it into its output first: a pass of
// its own); each kernel adds it in fp32 where it reads the product.

// The functions below that pass 64-byte vectors by value are static: no ABI boundary, hence no
// -Wpsabi concern (the warning is issued at the end of the translation unit, so it stays off for the
// includer's rest).
#pragma GCC diagnostic ignored "-Wpsabi"

namespace contextrag {
namespace CR_NS {

#include "cluster_rows_common.h"

static inline float enc_bf16_to_f32(unsigned short b) {
  const unsigned int u = (unsigned int)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// e^x for x ≤ 0 (Cephes' expf: n·ln2 split in two, a degree-7 polynomial), down to x = -87; below
// that 0, far under a softmax's sum, which holds e^0 = 1. Branch-free, so the loops over it vectorise.
// The reduction and polynomial for a float or a vector of them: n (x/ln2 rounded to nearest, for
// |x/ln2| < 2^22) and e^(x − n·ln2).
template <class T>
static inline T enc_exp_reduced(const T& x, T& n) {
  const T t = x * 1.44269504088896341f;
  n = (t + 12582912.0f) - 12582912.0f;
  const T r = (x - n * 0.693359375f) + n * 2.12194440e-4f;   // x − n·ln2, ln2 split in two
  T p = r * 0.0f + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * r * r + r + 1.0f;
}

static inline float enc_exp(float x) {
  x = x < -87.0f ? -87.0f : x;
  float n;
  const float p = enc_exp_reduced(x, n);
  const int e = (int)n + 127;
  const unsigned int bits = (unsigned int)e << 23;
  float s;
  memcpy(&s, &bits, 4);
  return x <= -87.0f ? 0.0f : p * s;
}

static const ptrdiff_t kEncW = 16, kEncR = 4;   // keys per register block, query rows per pass

// 16 lanes: one zmm under AVX-512, two ymm under AVX2, four xmm otherwise (GCC vector extensions).
typedef float enc_v16 __attribute__((vector_size(64), aligned(4)));
typedef unsigned int enc_u16 __attribute__((vector_size(64), aligned(4)));
typedef int enc_i16 __attribute__((vector_size(64), aligned(4)));
typedef unsigned short enc_h16 __attribute__((vector_size(32), aligned(2)));
static inline enc_v16 enc_ld(const float* p) {
  enc_v16 v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline void enc_st(float* p, const enc_v16& v) { memcpy(p, &v, sizeof v); }
static inline enc_v16 enc_max(const enc_v16& a, const enc_v16& b) { return a > b ? a : b; }
// 16 bf16 at p as floats
static inline enc_v16 enc_ld_bf16(const unsigned short* p) {
  enc_h16 h;
  memcpy(&h, p, sizeof h);
  return (enc_v16)(__builtin_convertvector(h, enc_u16) << 16);
}
// floats -> bf16 bits, round to nearest even, a NaN stays a quiet NaN (bf16_round, 16 lanes)
static inline enc_u16 enc_round_bits(const enc_v16& x) {
  const enc_u16 u = (enc_u16)x;
  const enc_u16 r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const enc_u16 q = (u >> 16) | 0x40u;
  return (enc_u16)(((u & 0x7fffffffu) > 0x7f800000u) ? q : r);
}
static inline void enc_st_bf16(unsigned short* p, const enc_v16& x) {
  const enc_h16 h = __builtin_convertvector(enc_round_bits(x), enc_h16);
  memcpy(p, &h, sizeof h);
}
// the bf16 rounding of x, as floats
static inline enc_v16 enc_as_bf16(const enc_v16& x) { return (enc_v16)(enc_round_bits(x) << 16); }
// enc_exp on 16 lanes
static inline enc_v16 enc_exp_v(const enc_v16& x0) {
  const enc_i16 lo = x0 < -87.0f;   // lanes below the floor: 0
  enc_v16 n;
  const enc_v16 p = enc_exp_reduced(lo ? enc_v16{} - 87.0f : x0, n);
  const enc_v16 s = (enc_v16)((enc_u16)(__builtin_convertvector(n, enc_i16) + 127) << 23);
  return lo ? enc_v16{} : p * s;
}

// acc[r] = Σ_j S[r, j] · V[j] for the rows of a pass, V rows of d = 16·DV floats, the 4·DV
// accumulators in registers (DV = 0: any other d, a plain loop).
template <int DV>
static void enc_context(const float* S, ptrdiff_t np, const float* V, ptrdiff_t n, ptrdiff_t d, ptrdiff_t R,
                        float* acc) {
  if (DV == 0) {
    for (ptrdiff_t r = 0; r < kEncR * d; ++r) acc[r] = 0.0f;
    for (ptrdiff_t j = 0; j < n; ++j)
      for (ptrdiff_t r = 0; r < R; ++r) {
        const float p = S[r * np + j];
        for (ptrdiff_t t = 0; t < d; ++t) acc[r * d + t] += p * V[j * d + t];
      }
    return;
  }
  enc_v16 a[kEncR][DV > 0 ? DV : 1];
  for (int r = 0; r < kEncR; ++r)
    for (int c = 0; c < DV; ++c) a[r][c] = enc_v16{};
  for (ptrdiff_t j = 0; j < n; ++j) {
    const float* v = V + j * d;
    for (int c = 0; c < DV; ++c) {
      const enc_v16 vc = enc_ld(v + 16 * c);
      for (int r = 0; r < kEncR; ++r) a[r][c] += S[r * np + j] * vc;
    }
  }
  for (int r = 0; r < kEncR; ++r)
    for (int c = 0; c < DV; ++c) enc_st(acc + r * d + 16 * c, a[r][c]);
}

// A token's d values of one head plus bias, in fp32 (into `dst`, times `scale`) or rounded to bf16
// again (into `row`, 2·d2 values with zeros past d).
static inline void enc_row_f32(const unsigned short* src, const float* bias, ptrdiff_t d, float scale, float* dst) {
  ptrdiff_t t = 0;
  for (; t + 16 <= d; t += 16) enc_st(dst + t, (enc_ld_bf16(src + t) + enc_ld(bias + t)) * scale);
  for (; t < d; ++t) dst[t] = (enc_bf16_to_f32(src[t]) + bias[t]) * scale;
}
static inline void enc_row_bf16(const unsigned short* src, const float* bias, ptrdiff_t d, ptrdiff_t d2,
                                unsigned short* row) {
  ptrdiff_t t = 0;
  for (; t + 16 <= d; t += 16) enc_st_bf16(row + t, enc_ld_bf16(src + t) + enc_ld(bias + t));
  for (; t < d; ++t) row[t] = bf16_round(enc_bf16_to_f32(src[t]) + bias[t]);
  for (; t < 2 * d2; ++t) row[t] = 0;
}

static const enc_v16 kEncLane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

// the largest of a row's first n scores, over whole vectors of its np ≥ n columns (multiple of 16)
static inline float enc_row_max(const float* sr, ptrdiff_t n, ptrdiff_t np) {
  enc_v16 vm = enc_v16{} - __builtin_inff();
  for (ptrdiff_t j = 0; j < np; j += 16)
    vm = enc_max(vm, (kEncLane + (float)j) < (float)n ? enc_ld(sr + j) : enc_v16{} - __builtin_inff());
  float mx = vm[0];
  for (int l = 1; l < 16; ++l) mx = vm[l] > mx ? vm[l] : mx;
  return mx;
}

// softmax in place of a row's n scores (fp32): e^(s − max) / Σ, over whole vectors of the row's
// np ≥ n columns, lanes past n masked (set to zero)
static inline void enc_softmax(float* sr, ptrdiff_t n, ptrdiff_t np) {
  const enc_v16& lane = kEncLane;
  const float mx = enc_row_max(sr, n, np);
  enc_v16 vs = {};
  for (ptrdiff_t j = 0; j < np; j += 16) {
    const enc_v16 e0 = enc_exp_v(enc_ld(sr + j) - mx);
    const enc_v16 e = (lane + (float)j) < (float)n ? e0 : enc_v16{};
    vs += e;
    enc_st(sr + j, e);
  }
  float sum = 0.0f;
  for (int l = 0; l < 16; ++l) sum += vs[l];
  const float inv = 1.0f / sum;
  for (ptrdiff_t j = 0; j < np; j += 16) enc_st(sr + j, enc_ld(sr + j) * inv);
}

// One head of a sequence, in fp32 on the vector units: q (n × d, scaled), Kt (d × np, keys past n
// zero), V (n × d); O rows at stride ldo (bf16 bits). S (kEncR × np), acc (kEncR × d): scratch. Rows
// of S past R are computed on zeros and never read.
static void attention_head(const float* Qf, const float* Kt, const float* V, ptrdiff_t n, ptrdiff_t d,
                           unsigned short* O, ptrdiff_t ldo, float* S, float* acc) {
  const ptrdiff_t np = (n + kEncW - 1) / kEncW * kEncW;
  static const float zero[256] = {0};
  for (ptrdiff_t i0 = 0; i0 < n; i0 += kEncR) {
    const ptrdiff_t R = n - i0 < kEncR ? n - i0 : kEncR;
    const float* q0 = Qf + i0 * d;
    const float* q1 = R > 1 ? q0 + d : zero;
    const float* q2 = R > 2 ? q0 + 2 * d : zero;
    const float* q3 = R > 3 ? q0 + 3 * d : zero;
    // scores: a block of 16 keys × 4 rows in registers, over the head's dims
    for (ptrdiff_t j0 = 0; j0 < np; j0 += kEncW) {
      enc_v16 s0 = {}, s1 = {}, s2 = {}, s3 = {};
      const float* k = Kt + j0;
      for (ptrdiff_t t = 0; t < d; ++t, k += np) {
        const enc_v16 kt = enc_ld(k);
        s0 += q0[t] * kt;
        s1 += q1[t] * kt;
        s2 += q2[t] * kt;
        s3 += q3[t] * kt;
      }
      enc_st(S + j0, s0);
      enc_st(S + np + j0, s1);
      enc_st(S + 2 * np + j0, s2);
      enc_st(S + 3 * np + j0, s3);
    }
    for (ptrdiff_t r = 0; r < R; ++r) enc_softmax(S + r * np, n, np);
    // context: the rows' probabilities times V
    if (d == 32) enc_context<2>(S, np, V, n, d, R, acc);
    else if (d == 64) enc_context<4>(S, np, V, n, d, R, acc);
    else if (d == 128) enc_context<8>(S, np, V, n, d, R, acc);
    else enc_context<0>(S, np, V, n, d, R, acc);
    for (ptrdiff_t r = 0; r < R; ++r) {
      ptrdiff_t t = 0;
      for (; t + 16 <= d; t += 16) enc_st_bf16(O + (i0 + r) * ldo + t, enc_ld(acc + r * d + t));
      for (; t < d; ++t) O[(i0 + r) * ldo + t] = bf16_round(acc[r * d + t]);
    }
  }
}

#if defined(CR_ENCODER_AMX)
// One head of a sequence on the AMX tiles (amx_dots, gemm_amx.cpp): q·kᵀ and p·v as bf16 tile
// products with fp32 sums, as torch's bf16 attention computes them: q + bias, k + bias and v + bias
// rounded to bf16 once, the scale applied to the fp32 scores, e^(s − max) rounded to bf16 for the
// product with v, the row sums and the division in fp32. The operands come packed in the tiles'
// layouts with zeros past n keys and d dims: Qp (rows × d2 pairs, rows a multiple of 32), Kp
// (d2 pairs × nk keys), Vp (n2 key pairs × dp dims). Pp (32 × n2 pairs), S (32 × nk), Ob (32 × dp):
// scratch. d2 = d/2 and n2 = n/2 rounded up to 16 pairs, nk = n and dp = d rounded up to 16.
static void attention_head_amx(const unsigned int* Qp, const unsigned int* Kp, const unsigned int* Vp, ptrdiff_t n,
                               ptrdiff_t d, float scale, unsigned short* O, ptrdiff_t ldo, unsigned int* Pp, float* S,
                               float* Ob) {
  const ptrdiff_t d2 = amx_pairs_padded((d + 1) / 2), nk = (n + 15) / 16 * 16;
  const ptrdiff_t n2 = amx_pairs_padded((n + 1) / 2), dp = (d + 15) / 16 * 16;
  const enc_v16& lane = kEncLane;
  unsigned short* pp = (unsigned short*)Pp;
  float sums[AMX_ROWS];
  for (ptrdiff_t i0 = 0; i0 < n; i0 += AMX_ROWS) {
    const ptrdiff_t R = n - i0 < AMX_ROWS ? n - i0 : AMX_ROWS;
    amx_dots(Qp + i0 * d2, d2, Kp, nk, d2, S, nk, nullptr, 0);
    for (ptrdiff_t r = 0; r < AMX_ROWS; ++r) {
      float* sr = S + r * nk;
      unsigned short* pr = pp + r * 2 * n2;
      if (r >= R) {
        memset(pr, 0, sizeof(unsigned short) * (size_t)(2 * n2));
        continue;
      }
      // whole vectors over the nk columns, the lanes past n masked (their scores are q·0)
      const float mx = enc_row_max(sr, n, nk);
      enc_v16 vs = {};
      for (ptrdiff_t j = 0; j < nk; j += 16) {
        const enc_v16 e0 = enc_as_bf16(enc_exp_v((enc_ld(sr + j) - mx) * scale));
        const enc_v16 e = (lane + (float)j) < (float)n ? e0 : enc_v16{};
        vs += e;
        enc_st_bf16(pr + j, e);
      }
      for (ptrdiff_t j = nk; j < 2 * n2; ++j) pr[j] = 0;
      float sum = 0.0f;
      for (int l = 0; l < 16; ++l) sum += vs[l];
      sums[r] = sum;
    }
    amx_dots(Pp, n2, Vp, dp, n2, Ob, dp, nullptr, 0);
    for (ptrdiff_t r = 0; r < R; ++r) {
      const float inv = 1.0f / sums[r];
      ptrdiff_t t = 0;
      for (; t + 16 <= d; t += 16) enc_st_bf16(O + (i0 + r) * ldo + t, enc_ld(Ob + r * dp + t) * inv);
      for (; t < d; ++t) O[(i0 + r) * ldo + t] = bf16_round(Ob[r * dp + t] * inv);
    }
  }
}
#endif

// threads > 0: the kernel's OpenMP team size (a caller that runs one pass per thread passes 1);
// 0: OpenMP's default.
static inline int enc_threads(int threads) { return threads > 0 ? threads : omp_get_max_threads(); }

// qkv: (B·L, 3·H·d) bf16 bits, columns [q heads | k heads | v heads], plus bias (3·H·d floats, the
// projections' bias added in fp32); out: (B·L, H·d) bf16 bits. One sequence per task: its token
// rows are read once, in order, and unpacked into every head's operands (a head's d values are 64
// bytes of a 2 KB row: read head by head, the rows' cache lines would be fetched one at a time).
// amx: run the heads on the AMX tiles (only where compiled with CR_ENCODER_AMX; the caller checks
// that the tiles are usable). Returns 0, or 1 when a thread could not allocate its scratch (the
// output is then incomplete).
int attention_bf16(const unsigned short* qkv, const float* bias, const long long* len, unsigned short* out,
                    ptrdiff_t B, ptrdiff_t L, ptrdiff_t H, ptrdiff_t d, float scale, int amx, int threads) {
  const int nt = enc_threads(threads);
  const ptrdiff_t ld = 3 * H * d, ldo = H * d, np = (L + kEncW - 1) / kEncW * kEncW;
  int failed = 0;
#if defined(CR_ENCODER_AMX)
  if (amx) {
    const ptrdiff_t d2 = amx_pairs_padded((d + 1) / 2), nkL = (L + 15) / 16 * 16, nqL = (L + 31) / 32 * 32;
    const ptrdiff_t n2L = amx_pairs_padded((L + 1) / 2), dp = (d + 15) / 16 * 16;
    const size_t per_head = (size_t)(nqL * d2 + d2 * nkL + n2L * dp);
#pragma omp parallel num_threads(nt)
    {
      AmxTiles tiles;
      const size_t words = (size_t)H * per_head + (size_t)(AMX_ROWS * n2L);
      unsigned int* w = (unsigned int*)aligned_alloc(64, (words * 4 + 63) / 64 * 64);
      float* f = (float*)aligned_alloc(64, (size_t)(AMX_ROWS * (nkL + dp)) * 4);
      if (w == NULL || f == NULL) {
#pragma omp atomic write
        failed = 1;
      }
      unsigned short row[512];
#pragma omp for schedule(dynamic, 1)
      for (ptrdiff_t b = 0; b < B; ++b) {
        const ptrdiff_t n = (ptrdiff_t)len[b];
        unsigned short* ob = out + b * L * ldo;
        if (n > 0 && w != NULL && f != NULL) {
          const ptrdiff_t nk = (n + 15) / 16 * 16, nq = (n + 31) / 32 * 32, n2 = amx_pairs_padded((n + 1) / 2);
          const size_t hq = (size_t)(nq * d2), hk = (size_t)(d2 * nk), hv = (size_t)(n2 * dp);
          unsigned int* Qp = w;
          unsigned int* Kp = Qp + H * hq;
          unsigned int* Vp = Kp + H * hk;
          unsigned int* Pp = Vp + H * hv;
          memset(w, 0, sizeof(unsigned int) * (size_t)H * (hq + hk + hv));
          for (ptrdiff_t j = 0; j < n; ++j) {
            const unsigned short* src = qkv + (b * L + j) * ld;
            for (ptrdiff_t h = 0; h < H; ++h) {
              enc_row_bf16(src + h * d, bias + h * d, d, d2, (unsigned short*)(Qp + h * hq + j * d2));
              enc_row_bf16(src + (H + h) * d, bias + (H + h) * d, d, d2, row);
              const unsigned int* pairs = (const unsigned int*)row;
              unsigned int* kp = Kp + h * hk + j;
              for (ptrdiff_t p = 0; p < (d + 1) / 2; ++p) kp[p * nk] = pairs[p];
            }
          }
          // v: keys 2p and 2p + 1 of each dim side by side, a pair of token rows at a time
          for (ptrdiff_t j = 0; j < n; j += 2) {
            const unsigned short* s0 = qkv + (b * L + j) * ld + 2 * H * d;
            const unsigned short* s1 = j + 1 < n ? s0 + ld : NULL;
            for (ptrdiff_t h = 0; h < H; ++h) {
              enc_row_bf16(s0 + h * d, bias + (2 * H + h) * d, d, d2, row);
              if (s1 != NULL) enc_row_bf16(s1 + h * d, bias + (2 * H + h) * d, d, d2, row + 256);
              else memset(row + 256, 0, sizeof(unsigned short) * (size_t)(2 * d2));
              unsigned int* vp = Vp + h * hv + (j >> 1) * dp;
              ptrdiff_t t = 0;
              for (; t + 16 <= d; t += 16) {
                enc_h16 a, c;
                memcpy(&a, row + t, sizeof a);
                memcpy(&c, row + 256 + t, sizeof c);
                const enc_u16 v = __builtin_convertvector(a, enc_u16) | (__builtin_convertvector(c, enc_u16) << 16);
                memcpy(vp + t, &v, sizeof v);
              }
              for (; t < d; ++t) vp[t] = (unsigned int)row[t] | ((unsigned int)row[256 + t] << 16);
            }
          }
          for (ptrdiff_t h = 0; h < H; ++h)
            attention_head_amx(Qp + h * hq, Kp + h * hk, Vp + h * hv, n, d, scale, ob + h * d, ldo, Pp, f,
                               f + AMX_ROWS * nk);
        }
        if (n < L) memset(ob + n * ldo, 0, sizeof(unsigned short) * (size_t)((L - n) * ldo));
      }
      free(w);
      free(f);
    }
    return failed;
  }
#else
  (void)amx;
#endif
#pragma omp parallel num_threads(nt)
  {
    // per head: q (L × d), Kt (d × np), V (L × d); then S (kEncR × np) and acc (kEncR × d)
    const size_t per_head = (size_t)(2 * L * d + d * np);
    float* buf = (float*)malloc(sizeof(float) * ((size_t)H * per_head + (size_t)(kEncR * np + kEncR * d)));
    if (buf == NULL) {
#pragma omp atomic write
      failed = 1;
    }
#pragma omp for schedule(dynamic, 1)
    for (ptrdiff_t b = 0; b < B; ++b) {
      const ptrdiff_t n = (ptrdiff_t)len[b];
      unsigned short* ob = out + b * L * ldo;
      if (n > 0 && buf != NULL) {
        const ptrdiff_t nn = (n + kEncW - 1) / kEncW * kEncW;
        const size_t hq = (size_t)(n * d), hk = (size_t)(d * nn);
        float* Qf = buf;
        float* Kt = Qf + H * hq;
        float* V = Kt + H * hk;
        float* S = V + H * hq;
        float* acc = S + kEncR * nn;
        for (ptrdiff_t j = 0; j < n; ++j) {
          const unsigned short* src = qkv + (b * L + j) * ld;
          for (ptrdiff_t h = 0; h < H; ++h) {
            enc_row_f32(src + h * d, bias + h * d, d, scale, Qf + h * hq + j * d);
            float* kt = Kt + h * hk + j;
            const unsigned short* ks = src + (H + h) * d;
            const float* bk = bias + (H + h) * d;
            for (ptrdiff_t t = 0; t < d; ++t) kt[t * nn] = enc_bf16_to_f32(ks[t]) + bk[t];
            enc_row_f32(src + (2 * H + h) * d, bias + (2 * H + h) * d, d, 1.0f, V + h * hq + j * d);
          }
        }
        for (ptrdiff_t h = 0; h < H; ++h) {
          float* kt = Kt + h * hk;
          for (ptrdiff_t t = 0; t < d; ++t)
            for (ptrdiff_t j = n; j < nn; ++j) kt[t * nn + j] = 0.0f;
          attention_head(Qf + h * hq, kt, V + h * hq, n, d, ob + h * d, ldo, S, acc);
        }
      }
      if (n < L) memset(ob + n * ldo, 0, sizeof(unsigned short) * (size_t)((L - n) * ldo));
    }
    free(buf);
  }
  return failed;
}

// h: (M, C) fp32, in place; y: (M, C) bf16 bits and its bias (C floats); out: (M, C) bf16 bits of
// the new h. Mean and variance in two passes over the row (fp32, 16 partial sums).
void add_layer_norm_bf16(float* h, const unsigned short* y, const float* ybias, const float* gamma,
                         const float* beta, float eps, unsigned short* out, ptrdiff_t M, ptrdiff_t C, int threads) {
  const ptrdiff_t Cv = C / 16 * 16;
  const int nt = enc_threads(threads);
#pragma omp parallel for schedule(static) num_threads(nt) if (M * C >= 65536)
  for (ptrdiff_t i = 0; i < M; ++i) {
    float* x = h + i * C;
    const unsigned short* yi = y + i * C;
    enc_v16 vs = {};
    ptrdiff_t c = 0;
    for (; c < Cv; c += 16) {
      const enc_v16 v = enc_ld(x + c) + enc_ld_bf16(yi + c) + enc_ld(ybias + c);
      enc_st(x + c, v);
      vs += v;
    }
    float sum = 0.0f;
    for (int l = 0; l < 16; ++l) sum += vs[l];
    for (; c < C; ++c) {
      x[c] += enc_bf16_to_f32(yi[c]) + ybias[c];
      sum += x[c];
    }
    const float mean = sum / (float)C;
    enc_v16 vv = {};
    for (c = 0; c < Cv; c += 16) {
      const enc_v16 t = enc_ld(x + c) - mean;
      vv += t * t;
    }
    float var = 0.0f;
    for (int l = 0; l < 16; ++l) var += vv[l];
    for (; c < C; ++c) var += (x[c] - mean) * (x[c] - mean);
    const float rstd = 1.0f / sqrtf(var / (float)C + eps);
    unsigned short* o = out + i * C;
    for (c = 0; c < Cv; c += 16) {
      const enc_v16 v = (enc_ld(x + c) - mean) * rstd * enc_ld(gamma + c) + enc_ld(beta + c);
      enc_st(x + c, v);
      enc_st_bf16(o + c, v);
    }
    for (; c < C; ++c) {
      x[c] = (x[c] - mean) * rstd * gamma[c] + beta[c];
      o[c] = bf16_round(x[c]);
    }
  }
}

// erf(z), absolute error < 1.5e-7 (Abramowitz & Stegun 7.1.26); branch-free.
static inline float enc_erf(float z) {
  const float a = z < 0.0f ? -z : z;
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  const float p = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  const float e = 1.0f - p * enc_exp(-a * a);
  return z < 0.0f ? -e : e;
}
static inline enc_v16 enc_erf_v(const enc_v16& z) {
  const enc_i16 neg = z < 0.0f;
  const enc_v16 a = neg ? -z : z;
  const enc_v16 t = 1.0f / (1.0f + 0.3275911f * a);
  const enc_v16 p = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  const enc_v16 e = 1.0f - p * enc_exp_v(-a * a);
  return neg ? -e : e;
}

// y (M, N) bf16 bits, in place: y ← GELU(y + bias), the exact (erf) form, bias N floats.
void bias_gelu_bf16(unsigned short* y, const float* bias, ptrdiff_t M, ptrdiff_t N, int threads) {
  const ptrdiff_t Nv = N / 16 * 16;
  const int nt = enc_threads(threads);
#pragma omp parallel for schedule(static) num_threads(nt) if (M * N >= 65536)
  for (ptrdiff_t i = 0; i < M; ++i) {
    unsigned short* yi = y + i * N;
    ptrdiff_t c = 0;
    for (; c < Nv; c += 16) {
      const enc_v16 x = enc_ld_bf16(yi + c) + enc_ld(bias + c);
      enc_st_bf16(yi + c, 0.5f * x * (1.0f + enc_erf_v(x * 0.70710678118654752f)));
    }
    for (; c < N; ++c) {
      const float x = enc_bf16_to_f32(yi[c]) + bias[c];
      yi[c] = bf16_round(0.5f * x * (1.0f + enc_erf(x * 0.70710678118654752f)));
    }
  }
}

}  // namespace CR_NS
}  // namespace contextrag
