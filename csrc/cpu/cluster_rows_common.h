// Small helpers for the per-ISA row loops (elkan_rows.h, fcm_rows.h) and the bf16 packers
// (gemm_bf16.cpp). Included inside the includer's namespace; C functions only (see fcm_rows.h).
#ifndef CONTEXTRAG_CLUSTER_ROWS_COMMON_H
#define CONTEXTRAG_CLUSTER_ROWS_COMMON_H

// float -> bf16 bits, round to nearest even; a NaN stays a (quiet) NaN. Branch-free, so loops over
// it vectorise.
static inline unsigned short bf16_round(float f) {
  unsigned int u;
  memcpy(&u, &f, 4);
  const unsigned int r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const unsigned int q = (u >> 16) | 0x40u;
  return (unsigned short)(((u & 0x7fffffffu) > 0x7f800000u) ? q : r);
}

// Σ (x − c)² accumulated in A.
template <class A, class T>
static inline A sq_dist(const T* x, const T* c, ptrdiff_t d) {
  A acc = A(0);
#pragma omp simd reduction(+ : acc)
  for (ptrdiff_t j = 0; j < d; ++j) {
    const A t = (A)x[j] - (A)c[j];
    acc += t * t;
  }
  return acc;
}

#endif
