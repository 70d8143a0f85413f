// CPU op registrations, one function per op family (each defined in its own file).
#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace contextrag {
void register_semiring(py::module_& m);     // semiring.cpp: luk_up/luk_down/fuzzy_route/meet_cardinality
void register_sparse(py::module_& m);       // semiring_sparse.cpp: the same with a CSR incidence
void register_kmeans(py::module_& m);       // kmeans.cpp: fused argmin, centroid sums, Elkan bounds
void register_fcm(py::module_& m);          // fcm.cpp: FCM memberships (row epilogue of the distance GEMM)
void register_gemm_bf16(py::module_& m);    // gemm_bf16.cpp: bf16-input, fp32-output GEMM (AVX512-BF16)
void register_gemm_f32(py::module_& m);     // gemm_f32.cpp: fp32 distance tiles on the calling thread for small problems
void register_spread(py::module_& m);       // spread.cpp: batched spreading hop over a CSR incidence
void register_lexical(py::module_& m);      // lexical_tokens.cpp: tokeniser and block map of the lexical families
void register_bm25(py::module_& m);         // bm25.cpp: a query token's BM25 terms from its postings
void register_dot_rows(py::module_& m);     // dot_rows.cpp: the cosine term on the rows a query scores
void register_encoder(py::module_& m);      // encoder.cpp: attention, add + LayerNorm, bias + GELU of the CPU embedder

void register_cpu(py::module_& m) {
  register_semiring(m);
  register_sparse(m);
  register_kmeans(m);
  register_fcm(m);
  register_gemm_bf16(m);
  register_gemm_f32(m);
  register_spread(m);
  register_lexical(m);
  register_bm25(m);
  register_dot_rows(m);
  register_encoder(m);
}
}  // namespace contextrag
