// The row loops of the bounded (Elkan) Lloyd iteration, written once and compiled per instruction
// set (cluster_rows_{avx512,avx2,generic}.cpp) inside `#pragma GCC target(...)` with CR_NS
// naming a per-ISA namespace; as in semiring_kernels.h only C functions are used, so no AVX-512 code
// reaches the baseline build through a shared COMDAT symbol. kmeans.cpp (fcm.cpp for the FCM rows) owns the arguments'
// checks, the OpenMP regions and the meaning of the state (see the comments there).

namespace contextrag {
namespace CR_NS {

#define CR_SHRINK (1.0f - 0x1p-22f)   /* > 2 ulps below 1: covers one float rounding */
#define CR_GROW (1.0 + 0x1p-50)

#include "cluster_rows_common.h"

template <class T>
static ptrdiff_t filter_range(const T* X, const T* C, ptrdiff_t d, ptrdiff_t k, const int64_t* lab, double* upper,
                              int32_t* uep, const float* L, const int32_t* lep, const float* lmin, const float* dl,
                              const float* dmax, const double* disp, int32_t now, ptrdiff_t lo, ptrdiff_t hi,
                              int64_t* out) {
  ptrdiff_t n_out = 0;
  for (ptrdiff_t i = lo; i < hi; ++i) {
    const int64_t a = lab[i];
    double u = (upper[i] + disp[(ptrdiff_t)uep[i] * k + a]) * CR_GROW;
    // Hamerly's test first (min_j L[j] less the largest displacement): late in a fit it settles
    // most rows without reading their k bounds.
    if (u <= (double)((lmin[i] - dmax[lep[i]]) * CR_SHRINK)) continue;
    const float* l = L + i * k;
    const float* dr = dl + (ptrdiff_t)lep[i] * k;
    float mn = INFINITY;
#pragma omp simd reduction(min : mn)
    for (ptrdiff_t j = 0; j < k; ++j) {
      const float t = (l[j] - dr[j]) * CR_SHRINK;   // +inf (the own centre) stays +inf
      mn = t < mn ? t : mn;
    }
    if (u > (double)mn) {
      u = sqrt(sq_dist<double>(X + i * d, C + a * d, d)) * CR_GROW;
      upper[i] = u;
      uep[i] = now;
      if (u > (double)mn) out[n_out++] = i;
    }
  }
  return n_out;
}

template <class T>
static void refresh_range(const T* G, const T* X, const T* C, ptrdiff_t d, ptrdiff_t k, const double* xn2,
                          const int64_t* rows, ptrdiff_t row0, int64_t* lab, double* upper, float* L, int32_t* uep,
                          int32_t* lep, float* lmin, int32_t now, double gamma, double cmax, double eb, double cnorm,
                          ptrdiff_t r0, ptrdiff_t r1) {
  for (ptrdiff_t r = r0; r < r1; ++r) {
    const ptrdiff_t i = rows ? (ptrdiff_t)rows[r] : row0 + r;
    const T* g = G + r * k;
    T gm = g[0];
#pragma omp simd reduction(min : gm)
    for (ptrdiff_t t = 0; t < k; ++t) gm = g[t] < gm ? g[t] : gm;
    ptrdiff_t j = 0;
    while (j + 1 < k && g[j] != gm) ++j;   // first index attaining the minimum (the plain loop's choice)
    // eb > 0: G came from bf16 operands, |G̃ − G| ≤ E. Every centre within 2E of the smallest G̃ may be
    // the nearest: those few are compared by exact distance (first index on ties), the rest are out.
    const double E = eb > 0.0 ? eb * sqrt(xn2[i]) * cnorm : 0.0;
    double ub = -1.0;
    if (E > 0.0) {
      const double thr = (double)gm + 2.0 * (E + gamma * (xn2[i] + cmax));   // both errors, both sides
      int ncand = 0;
#pragma omp simd reduction(+ : ncand)
      for (ptrdiff_t t = 0; t < k; ++t) ncand += (double)g[t] <= thr;
      if (ncand > 1) {
        const T* x = X + i * d;
        double best = INFINITY;
        for (ptrdiff_t t = 0; t < k; ++t) {
          if ((double)g[t] > thr) continue;
          const double acc = sq_dist<double>(x, C + t * d, d);
          if (acc < best) { best = acc; j = t; }
        }
        ub = sqrt(best) * CR_GROW;
      }
    }
    lab[i] = j;
    // Upper bound from the GEMM form plus the slack (no second pass over x; the filter tightens it
    // to the exact distance only when a test fails).
    if (ub < 0.0) {
      const double v = ((double)g[j] + E + xn2[i] + gamma * (xn2[i] + cmax)) * (1.0 + 0x1p-40);
      ub = sqrt(v > 0.0 ? v : 0.0) * CR_GROW;
    }
    upper[i] = ub;
    uep[i] = now;
    lep[i] = now;
    // G + ‖x‖² − slack, in float: the slack (γ_d ≫ one more float rounding) absorbs the sum's error.
    const float base = (float)(xn2[i] - E - gamma * (xn2[i] + cmax));
    float* l = L + i * k;
    float mn = INFINITY;
#pragma omp simd reduction(min : mn)
    for (ptrdiff_t t = 0; t < k; ++t) {
      const float v = ((float)g[t] + base) * (1.0f - 0x1p-20f);
      const float lb = sqrtf(v > 0.0f ? v : 0.0f) * CR_SHRINK;
      l[t] = lb;
      mn = (t != j && lb < mn) ? lb : mn;
    }
    lmin[i] = mn;
    l[j] = INFINITY;
  }
}

// k-means++ seeding (kmeanspp in kmeans.cpp): for rows lo..hi of S, D[i, c] = min(d2[i], ‖s_i − s_cand[c]‖²)
// by direct differences (never below 0, no cancellation) and pot[c] += D[i, c] in double.
// Register tile of 4 rows × 2 candidates in 32-byte vectors (GCC vector extensions, so each ISA build
// picks its own instructions): 8 independent accumulator chains, 6 loads per 16 vector ops, where one
// chain per row is bound by the add latency while the sample sits in cache. When it does not (a
// 9.4 MB sample on a loaded machine), both are bound by reading the sample: measured alike there.
#define CR_PP_TILE(T, VT, W)                                                                              \
  typedef T VT __attribute__((vector_size(32)));                                                         \
  static inline VT VT##_load(const T* p) { VT v; memcpy(&v, p, sizeof(VT)); return v; }                   \
  static inline T VT##_hsum(VT v) { T s = 0; for (int l = 0; l < W; ++l) s += v[l]; return s; }          \
  static void pp_tile(const T* const* s, const T* q0, const T* q1, ptrdiff_t d, T* out /* [4][2] */) {     \
    VT a00 = {}, a01 = {}, a10 = {}, a11 = {}, a20 = {}, a21 = {}, a30 = {}, a31 = {};                   \
    ptrdiff_t j = 0;                                                                                     \
    for (; j + W <= d; j += W) {                                                                         \
      const VT c0 = VT##_load(q0 + j), c1 = VT##_load(q1 + j);                                           \
      VT x = VT##_load(s[0] + j), t0 = x - c0, t1 = x - c1;                                              \
      a00 += t0 * t0; a01 += t1 * t1;                                                                    \
      x = VT##_load(s[1] + j); t0 = x - c0; t1 = x - c1;                                                 \
      a10 += t0 * t0; a11 += t1 * t1;                                                                    \
      x = VT##_load(s[2] + j); t0 = x - c0; t1 = x - c1;                                                 \
      a20 += t0 * t0; a21 += t1 * t1;                                                                    \
      x = VT##_load(s[3] + j); t0 = x - c0; t1 = x - c1;                                                 \
      a30 += t0 * t0; a31 += t1 * t1;                                                                    \
    }                                                                                                    \
    T r[8] = {VT##_hsum(a00), VT##_hsum(a01), VT##_hsum(a10), VT##_hsum(a11),                            \
              VT##_hsum(a20), VT##_hsum(a21), VT##_hsum(a30), VT##_hsum(a31)};                           \
    for (; j < d; ++j)                                                                                   \
      for (int u = 0; u < 4; ++u) {                                                                      \
        const T t0 = s[u][j] - q0[j], t1 = s[u][j] - q1[j];                                              \
        r[2 * u] += t0 * t0;                                                                             \
        r[2 * u + 1] += t1 * t1;                                                                         \
      }                                                                                                  \
    for (int e = 0; e < 8; ++e) out[e] = r[e];                                                           \
  }
CR_PP_TILE(float, cr_v8f, 8)
CR_PP_TILE(double, cr_v4d, 4)
#undef CR_PP_TILE

// need (m × nc, or null: every pair): whether row i's distance to candidate c must be computed; where
// not, the candidate is provably no nearer than d2[i] (kmeanspp's triangle test) and D[i, c] = d2[i],
// the value min(d2[i], distance) would give. A tile of 4 rows × 2 candidates whose pairs are all
// needed runs the register tile; otherwise its needed pairs are summed one by one (sq_dist, the
// order the rows past the last whole tile already use).
template <class T>
static void pp_rows(const T* S, ptrdiff_t d, const int64_t* cand, ptrdiff_t nc, const T* d2, T* D, double* pot,
                    ptrdiff_t lo, ptrdiff_t hi, const unsigned char* need) {
  ptrdiff_t i = lo;
  for (; i + 4 <= hi; i += 4) {
    const T* s[4] = {S + i * d, S + (i + 1) * d, S + (i + 2) * d, S + (i + 3) * d};
    for (ptrdiff_t c = 0; c < nc; c += 2) {
      const ptrdiff_t c1 = c + 1 < nc ? c + 1 : c;   // an odd last candidate is paired with itself
      T v[8];
      int nneed = 8;
      if (need) {
        nneed = 0;
        for (int r = 0; r < 4; ++r) nneed += need[(i + r) * nc + c] + need[(i + r) * nc + c1];
      }
      if (nneed < 8) {   // some pairs settled: the others one by one (the tile pays only when all are needed)
        for (int r = 0; r < 4; ++r)
          for (ptrdiff_t e = 0; e < (c1 > c ? 2 : 1); ++e) {
            const T w0 = need[(i + r) * nc + c + e] ? sq_dist<T>(s[r], S + cand[c + e] * d, d) : d2[i + r];
            const T w = w0 < d2[i + r] ? w0 : d2[i + r];
            D[(i + r) * nc + c + e] = w;
            pot[c + e] += (double)w;
          }
        continue;
      }
      pp_tile(s, S + cand[c] * d, S + cand[c1] * d, d, v);
      for (int r = 0; r < 4; ++r)
        for (ptrdiff_t e = 0; e < (c1 > c ? 2 : 1); ++e) {
          const T w = v[2 * r + e] < d2[i + r] ? v[2 * r + e] : d2[i + r];
          D[(i + r) * nc + c + e] = w;
          pot[c + e] += (double)w;
        }
    }
  }
  for (; i < hi; ++i) {
    const T* s = S + i * d;
    for (ptrdiff_t c = 0; c < nc; ++c) {
      T v = need && !need[i * nc + c] ? d2[i] : sq_dist<T>(s, S + cand[c] * d, d);
      v = v < d2[i] ? v : d2[i];
      D[i * nc + c] = v;
      pot[c] += (double)v;
    }
  }
}

// Rows lo .. hi added into their clusters' sums P (k × d, in A) and counts Cp, each sum in row order
// (the bits do not depend on the vector width); returns 1 if a label lies outside [0, k) (such rows
// are skipped).
template <class T, class A>
static int sum_rows(const T* X, ptrdiff_t d, const int64_t* lab, ptrdiff_t k, ptrdiff_t lo, ptrdiff_t hi, A* P,
                    int64_t* Cp) {
  int bad = 0;
  for (ptrdiff_t i = lo; i < hi; ++i) {
    const int64_t c = lab[i];
    if (c < 0 || c >= k) {
      bad = 1;
      continue;
    }
    A* dst = P + c * d;
    const T* src = X + i * d;
#pragma omp simd
    for (ptrdiff_t j = 0; j < d; ++j) dst[j] += (A)src[j];
    Cp[c] += 1;
  }
  return bad;
}

// Rows lo .. hi of R minus their centres (R[i] −= C[lab[i]], in T, in place); sq[i] = ‖R[i]‖² after,
// accumulated in double. Labels are checked by the caller.
template <class T>
static void subtract_rows(T* R, const T* C, const int64_t* lab, ptrdiff_t d, ptrdiff_t lo, ptrdiff_t hi, double* sq) {
  for (ptrdiff_t i = lo; i < hi; ++i) {
    T* r = R + i * d;
    const T* c = C + lab[i] * d;
    double acc = 0.0;
#pragma omp simd reduction(+ : acc)
    for (ptrdiff_t j = 0; j < d; ++j) {
      const T v = r[j] - c[j];
      r[j] = v;
      acc += (double)v * (double)v;
    }
    sq[i] = acc;
  }
}

int sum_rows_f32_f64(const float* X, ptrdiff_t d, const int64_t* lab, ptrdiff_t k, ptrdiff_t lo, ptrdiff_t hi,
                     double* P, int64_t* Cp) {
  return sum_rows<float, double>(X, d, lab, k, lo, hi, P, Cp);
}

#define CR_ELKAN_EXPORT(T, sfx)                                                                          \
  ptrdiff_t elkan_filter_range_##sfx(const T* X, const T* C, ptrdiff_t d, ptrdiff_t k, const int64_t* lab,  \
                                     double* upper, int32_t* uep, const float* L, const int32_t* lep,       \
                                     const float* lmin, const float* dl, const float* dmax,                 \
                                     const double* disp, int32_t now, ptrdiff_t lo, ptrdiff_t hi,           \
                                     int64_t* out) {                                                        \
    return filter_range<T>(X, C, d, k, lab, upper, uep, L, lep, lmin, dl, dmax, disp, now, lo, hi, out);    \
  }                                                                                                         \
  void elkan_refresh_range_##sfx(const T* G, const T* X, const T* C, ptrdiff_t d, ptrdiff_t k,              \
                                 const double* xn2, const int64_t* rows, ptrdiff_t row0, int64_t* lab,      \
                                 double* upper, float* L, int32_t* uep, int32_t* lep, float* lmin,          \
                                 int32_t now, double gamma, double cmax, double eb, double cnorm,           \
                                 ptrdiff_t r0, ptrdiff_t r1) {                                              \
    refresh_range<T>(G, X, C, d, k, xn2, rows, row0, lab, upper, L, uep, lep, lmin, now, gamma, cmax, eb,   \
                     cnorm, r0, r1);                                                                        \
  }                                                                                                         \
  void pp_rows_##sfx(const T* S, ptrdiff_t d, const int64_t* cand, ptrdiff_t nc, const T* d2, T* D,         \
                     double* pot, ptrdiff_t lo, ptrdiff_t hi, const unsigned char* need) {                  \
    pp_rows<T>(S, d, cand, nc, d2, D, pot, lo, hi, need);                                                   \
  }                                                                                                         \
  int sum_rows_##sfx(const T* X, ptrdiff_t d, const int64_t* lab, ptrdiff_t k, ptrdiff_t lo, ptrdiff_t hi,  \
                     T* P, int64_t* Cp) {                                                                   \
    return sum_rows<T, T>(X, d, lab, k, lo, hi, P, Cp);                                                     \
  }                                                                                                         \
  void subtract_rows_##sfx(T* R, const T* C, const int64_t* lab, ptrdiff_t d, ptrdiff_t lo, ptrdiff_t hi,   \
                           double* sq) {                                                                    \
    subtract_rows<T>(R, C, lab, d, lo, hi, sq);                                                             \
  }
CR_ELKAN_EXPORT(float, f32)
CR_ELKAN_EXPORT(double, f64)
#undef CR_ELKAN_EXPORT
#undef CR_SHRINK
#undef CR_GROW

}  // namespace CR_NS
}  // namespace contextrag
