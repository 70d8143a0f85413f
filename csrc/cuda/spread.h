// Host launcher of the CUDA spreading hop (csrc/cuda/spread.cu). Plain C++ types only.
#pragma once
#include <cstdint>
#include <string>

namespace contextrag {
namespace cuda {

// out (Q, n), zero-filled by the caller, receives max(out, v_e + I(c, a_e) − 1) for every activation
// entry e = (q_e, a_e, v_e, sdoc_e, self_e) and every chunk c of attribute a_e's column (t_indptr,
// t_indices, t_data: the CSR of Iᵀ), skipping c when self_e >= 0, doc[c] == sdoc_e and c != self_e.
// doc may be 0 (no sibling rule). dtype 0 float32, 1 float64.
std::string spread_hop(int dtype, uintptr_t t_indptr, uintptr_t t_indices, uintptr_t t_data, uintptr_t doc,
                       uintptr_t e_q, uintptr_t e_a, uintptr_t e_v, uintptr_t e_sdoc, uintptr_t e_self,
                       int64_t n_entries, uintptr_t out, int64_t n, uintptr_t stream);

}  // namespace cuda
}  // namespace contextrag
