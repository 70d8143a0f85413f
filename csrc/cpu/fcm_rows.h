// The FCM membership epilogue, written once and compiled per instruction set
// (cluster_rows_{avx512,avx2,generic}.cpp) inside `#pragma GCC target(...)` with CR_NS naming a per-ISA namespace: as in
// semiring_kernels.h, only C functions and intrinsics are used, so no AVX-512 code can reach the
// baseline build through a shared COMDAT symbol.
//
// Per row i of a distance tile G = ‖c‖² − 2x·c (b × c):
//   d_j = max(0, G_j + ‖x‖²), recomputed exactly as Σ(x − c)² where d_j ≤ slack·(‖x‖² + max‖c‖²)
//   (there the GEMM form's cancellation could dominate); u_j = (d_min/d_j)^p / Σ, p = 1/(m − 1);
//   a point on a centre gets a one-hot row.
// Optional outputs in the same pass: W = u^m (row-major, or transposed and rounded to bf16 for the
// bf16 centre GEMM), max |u − u_prev| (returned) and the row objective J_i = Σ_j u^m d_j.

namespace contextrag {
namespace CR_NS {

#include "cluster_rows_common.h"

static inline float fr_pow(float a, float b) { return powf(a, b); }
static inline double fr_pow(double a, double b) { return pow(a, b); }
static inline float fr_abs(float a) { return fabsf(a); }
static inline double fr_abs(double a) { return fabs(a); }

template <class T>
static double fcm_rows_t(const T* G, const T* X, const T* C, const T* xn, ptrdiff_t b, ptrdiff_t c, ptrdiff_t d,
                         double m_, T slack, T* U, T* W, unsigned short* Wt, ptrdiff_t ldwt, ptrdiff_t row0,
                         const T* Uprev, T* J) {
  const T m = (T)m_, p = (T)(1.0 / (m_ - 1.0));
  T cnmax = T(0);
  for (ptrdiff_t j = 0; j < c; ++j) {
    T acc = T(0);
    for (ptrdiff_t t = 0; t < d; ++t) acc += C[j * d + t] * C[j * d + t];
    cnmax = acc > cnmax ? acc : cnmax;
  }
  T delta = T(0);
#pragma omp parallel reduction(max : delta)
  {
    // Rows split statically by hand: each thread walks its own contiguous range and, for Wt, keeps
    // the weights of 16 rows to write as 16 adjacent bf16 per centre (not 96 scattered stores a row).
    const ptrdiff_t nt = omp_get_num_threads(), tid = omp_get_thread_num();
    const ptrdiff_t lo = b * tid / nt, hi = b * (tid + 1) / nt;
    enum { WB = 16 };
    T* d2 = (T*)malloc(sizeof(T) * (size_t)(c > 0 ? c : 1));
    T* wbuf = (T*)malloc(sizeof(T) * (size_t)(c > 0 ? c : 1) * WB);
    for (ptrdiff_t i = lo; i < hi; ++i) {
      const T* g = G + i * c;
      const T* x = X + i * d;
      T* u = U + i * c;
      const T x2 = xn[i];
      const T tiny = slack * (x2 + cnmax);
      T dmin = (T)INFINITY;
      int ntiny = 0;
#pragma omp simd reduction(min : dmin) reduction(+ : ntiny)
      for (ptrdiff_t j = 0; j < c; ++j) {
        T t = g[j] + x2;
        t = t > T(0) ? t : T(0);
        d2[j] = t;
        dmin = t < dmin ? t : dmin;
        ntiny += t <= tiny;
      }
      if (ntiny) {  // rare: recompute the small distances exactly, then the minimum
        dmin = (T)INFINITY;
        for (ptrdiff_t j = 0; j < c; ++j) {
          if (d2[j] <= tiny) d2[j] = sq_dist<T>(x, C + j * d, d);
          dmin = d2[j] < dmin ? d2[j] : dmin;
        }
      }
      T* w = W ? W + i * c : wbuf + ((i - lo) % WB) * c;
      const T* q = Uprev ? Uprev + i * c : nullptr;
      T dl = T(0);
      double jacc = 0.0;
      if (dmin <= T(0)) {  // the point sits on a centre: one-hot on the first such centre
        ptrdiff_t jm = 0;
        while (d2[jm] > T(0)) ++jm;
        for (ptrdiff_t j = 0; j < c; ++j) u[j] = T(0);
        u[jm] = T(1);
        for (ptrdiff_t j = 0; j < c; ++j) {
          w[j] = j == jm ? T(1) : T(0);
          if (q) { const T t = fr_abs(u[j] - q[j]); dl = t > dl ? t : dl; }
        }
      } else {
        T sum = T(0);
        if (p == T(1)) {
#pragma omp simd reduction(+ : sum)
          for (ptrdiff_t j = 0; j < c; ++j) { const T v = dmin / d2[j]; u[j] = v; sum += v; }
        } else {
          for (ptrdiff_t j = 0; j < c; ++j) { const T v = fr_pow(dmin / d2[j], p); u[j] = v; sum += v; }
        }
        const T inv = T(1) / sum;
        if (m == T(2)) {  // one fused pass: normalise, W = u², |Δu|, Σ w·d²
          if (q) {
#pragma omp simd reduction(max : dl) reduction(+ : jacc)
            for (ptrdiff_t j = 0; j < c; ++j) {
              const T uj = u[j] * inv, wj = uj * uj, t = fr_abs(uj - q[j]);
              u[j] = uj; w[j] = wj;
              dl = t > dl ? t : dl;
              jacc += (double)wj * (double)d2[j];
            }
          } else {
#pragma omp simd reduction(+ : jacc)
            for (ptrdiff_t j = 0; j < c; ++j) {
              const T uj = u[j] * inv, wj = uj * uj;
              u[j] = uj; w[j] = wj;
              jacc += (double)wj * (double)d2[j];
            }
          }
        } else {
          for (ptrdiff_t j = 0; j < c; ++j) {
            const T uj = u[j] * inv, wj = fr_pow(uj, m);
            u[j] = uj; w[j] = wj;
            if (q) { const T t = fr_abs(uj - q[j]); dl = t > dl ? t : dl; }
            jacc += (double)wj * (double)d2[j];
          }
        }
      }
      if (dmin <= T(0)) jacc = 0.0;   // u^m·d² is 0 on the centre, 0·(…) elsewhere
      if (Wt && ((i - lo) % WB == WB - 1 || i == hi - 1)) {  // flush: columns i0..i of the (c, ldwt) Wt
        const ptrdiff_t i0 = i - (i - lo) % WB, nr = i - i0 + 1;
        const T* src = W ? W + i0 * c : wbuf;
        for (ptrdiff_t j = 0; j < c; ++j) {
          unsigned short* dst = Wt + j * ldwt + row0 + i0;
          for (ptrdiff_t r = 0; r < nr; ++r) dst[r] = bf16_round((float)src[r * c + j]);
        }
      }
      delta = dl > delta ? dl : delta;
      if (J) J[i] = (T)jacc;
    }
    free(d2);
    free(wbuf);
  }
  return (double)delta;
}

double fcm_rows_f32(const float* G, const float* X, const float* C, const float* xn, ptrdiff_t b, ptrdiff_t c,
                    ptrdiff_t d, double m, float slack, float* U, float* W, unsigned short* Wt, ptrdiff_t ldwt,
                    ptrdiff_t row0, const float* Uprev, float* J) {
  return fcm_rows_t<float>(G, X, C, xn, b, c, d, m, slack, U, W, Wt, ldwt, row0, Uprev, J);
}
double fcm_rows_f64(const double* G, const double* X, const double* C, const double* xn, ptrdiff_t b, ptrdiff_t c,
                    ptrdiff_t d, double m, double slack, double* U, double* W, unsigned short* Wt, ptrdiff_t ldwt,
                    ptrdiff_t row0, const double* Uprev, double* J) {
  return fcm_rows_t<double>(G, X, C, xn, b, c, d, m, slack, U, W, Wt, ldwt, row0, Uprev, J);
}

}  // namespace CR_NS
}  // namespace contextrag
