// The products of the semiring family, named once for the CPU kernels, the CUDA kernels and Python
// (contextrag._C.SemiringMode). out = R_k op(A[m, k], B[k, n]) followed by the mode's epilogue.
#pragma once

namespace contextrag {

enum class SemiringMode : int {
  min_plus = 0,  // min(1, 1 + min_k (B − A))       Łukasiewicz A↑ / B↓ (luk_up, luk_down; eq. 6-7)
  max_plus = 1,  // max(0, max_k (A + B) − 1)       fuzzy routing (fuzzy_route; eq. 16)
  min_sum = 2,   // Σ_k min(A, B)                   meet cardinality (meet_cardinality)
};

}  // namespace contextrag
