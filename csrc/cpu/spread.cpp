// One spreading hop (chunks → attributes → chunks) over a sparse fuzzy incidence, batched over queries.
//
//   hop[q, c] = max( max_a μ(q,a) ⊗ I(c,a),  max_{s ∈ seeds(q), c = s or doc(c) ≠ doc(s)} max_a ρ(q,s) ⊗ I(s,a) ⊗ I(c,a) )
//
// with a ⊗ b = max(0, a + b − 1). I is given twice, as CSR (rows = chunks: a seed's attributes) and as
// the CSR of its transpose (rows = attributes: the chunks holding one). Per query the work is the
// entries of the seeds' rows plus the columns of the attributes they activate above 0 (a common,
// low-weight attribute never passes the t-norm, so it is skipped before its long column is read).
// Queries run in parallel (OpenMP), each writing its own output row: no atomics. The inner loop is a
// scatter of max into the output row, which SIMD does not speed up on AVX2, so there is one portable
// build of it and nothing to dispatch.
// Arithmetic is the same as the NumPy gather it replaces: v = (ρ + I(s,a)) − 1, then (v + I(c,a)) − 1,
// in the incidence's dtype, so the results are equal bit for bit.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <omp.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace py = pybind11;

namespace contextrag {
namespace {

template <class T>
using arr = py::array_t<T, py::array::c_style | py::array::forcecast>;

// `by_degree`: each column's entries are in decreasing degree, so the walk stops at the first entry
// whose path degree (v + I(c, a)) - 1 is not positive: none after it can raise an item either.
template <class T, class Ix>
static void hop_column(T* __restrict o, const Ix* __restrict idx, const T* __restrict val, int64_t b,
                       int64_t e, T v, const int64_t* doc, int64_t sdoc, int64_t self, bool by_degree) {
  if (doc == nullptr || self < 0) {
    for (int64_t p = b; p < e; ++p) {
      T t = (v + val[p]) - T(1);
      if (by_degree && !(t > T(0))) break;
      int64_t c = idx[p];
      if (t > o[c]) o[c] = t;
    }
  } else {
    for (int64_t p = b; p < e; ++p) {
      T t = (v + val[p]) - T(1);
      if (by_degree && !(t > T(0))) break;
      int64_t c = idx[p];
      if (doc[c] == sdoc && c != self) continue;   // no path from a seed to its sibling chunks
      if (t > o[c]) o[c] = t;
    }
  }
}

// Ix: the dtype of the column indices of I and Iᵀ (int32 where the shape fits it: half the bytes an
// index stores and maps; the row pointers stay int64, as the entries may pass 2^31).
template <class T, class Ix>
static py::array_t<T> spread_typed(arr<int64_t> indptr, arr<Ix> indices, arr<T> data, arr<int64_t> t_indptr,
                                   arr<Ix> t_indices, arr<T> t_data, int64_t n, py::object doc_o,
                                   arr<int64_t> seeds, arr<T> deg, py::object mu_indptr_o, py::object mu_indices_o,
                                   py::object mu_data_o, bool by_degree) {
  if (seeds.ndim() != 2 || deg.ndim() != 2 || seeds.shape(0) != deg.shape(0) || seeds.shape(1) != deg.shape(1))
    throw std::invalid_argument("spread_hop: seeds and seed_deg must be (Q, S) of one shape");
  const int64_t Q = seeds.shape(0), S = seeds.shape(1);
  const int64_t M = t_indptr.shape(0) - 1;
  if (indptr.shape(0) != n + 1) throw std::invalid_argument("spread_hop: indptr must have n + 1 entries");
  arr<int64_t> doc_a;
  const int64_t* doc = nullptr;
  if (!doc_o.is_none()) {
    doc_a = doc_o.cast<arr<int64_t>>();
    if (doc_a.shape(0) != n) throw std::invalid_argument("spread_hop: doc must have n entries");
    doc = doc_a.data();
  }
  arr<int64_t> mu_ip, mu_ix;
  arr<T> mu_v;
  const bool has_mu = !mu_indptr_o.is_none();
  if (has_mu) {
    mu_ip = mu_indptr_o.cast<arr<int64_t>>();
    mu_ix = mu_indices_o.cast<arr<int64_t>>();
    mu_v = mu_data_o.cast<arr<T>>();
    if (mu_ip.shape(0) != Q + 1) throw std::invalid_argument("spread_hop: mu must have Q rows");
  }
  const int64_t *ip = indptr.data(), *tip = t_indptr.data();
  const Ix *ix = indices.data(), *tix = t_indices.data();
  const T *dv = data.data(), *tdv = t_data.data();
  const int64_t* sd = seeds.data();
  const T* rho = deg.data();
  const int64_t* mip = has_mu ? mu_ip.data() : nullptr;
  const int64_t* mix = has_mu ? mu_ix.data() : nullptr;
  const T* mv = has_mu ? mu_v.data() : nullptr;
  // validate indices once (cheap next to the hop) so the kernel can trust them
  for (int64_t i = 0; i < Q * S; ++i)
    if (sd[i] >= n) throw std::invalid_argument("spread_hop: a seed index is >= n");
  if (has_mu)
    for (int64_t p = 0; p < mip[Q]; ++p)
      if (mix[p] < 0 || mix[p] >= M) throw std::invalid_argument("spread_hop: a mu column is out of range");
  py::array_t<T> out({Q, n});
  T* o = out.mutable_data();
  {
    py::gil_scoped_release nogil;
#pragma omp parallel for schedule(dynamic, 1) if (Q > 1)
    for (int64_t q = 0; q < Q; ++q) {
      T* oq = o + q * n;
      for (int64_t c = 0; c < n; ++c) oq[c] = T(0);
      if (has_mu)
        for (int64_t p = mip[q]; p < mip[q + 1]; ++p) {
          const T v = mv[p];
          if (!(v > T(0))) continue;
          const int64_t a = mix[p];
          hop_column(oq, tix, tdv, tip[a], tip[a + 1], v, nullptr, 0, -1, by_degree);
        }
      for (int64_t j = 0; j < S; ++j) {
        const int64_t s = sd[q * S + j];
        if (s < 0) continue;
        const T r = rho[q * S + j];
        const int64_t sdoc = doc ? doc[s] : 0;
        for (int64_t p = ip[s]; p < ip[s + 1]; ++p) {
          const T v = (r + dv[p]) - T(1);
          if (!(v > T(0))) continue;
          const int64_t a = ix[p];
          hop_column(oq, tix, tdv, tip[a], tip[a + 1], v, doc, sdoc, s, by_degree);
        }
      }
    }
  }
  return out;
}

}  // namespace

void register_spread(py::module_& m) {
  // one entry point per (data, index) dtype: with forcecast a single one would copy an int32 index to
  // int64 at every call
#define CONTEXTRAG_SPREAD_DEF(NAME, T, IX, DOC)                                                             \
  m.def(NAME, &spread_typed<T, IX>, py::arg("indptr"), py::arg("indices"), py::arg("data"), py::arg("t_indptr"), \
        py::arg("t_indices"), py::arg("t_data"), py::arg("n"), py::arg("doc"), py::arg("seeds"),                \
        py::arg("seed_deg"), py::arg("mu_indptr"), py::arg("mu_indices"), py::arg("mu_data"),                  \
        py::arg("by_degree") = false, DOC)
  CONTEXTRAG_SPREAD_DEF("spread_hop_f32", float, int64_t,
                        "(Q, n) spreading hop over a CSR incidence and its transpose (float32, int64 indices); "
                        "see csrc/cpu/spread.cpp.");
  CONTEXTRAG_SPREAD_DEF("spread_hop_f64", double, int64_t, "(Q, n) spreading hop (float64, int64 indices).");
  CONTEXTRAG_SPREAD_DEF("spread_hop_f32_i32", float, int32_t, "(Q, n) spreading hop (float32, int32 indices).");
  CONTEXTRAG_SPREAD_DEF("spread_hop_f64_i32", double, int32_t, "(Q, n) spreading hop (float64, int32 indices).");
#undef CONTEXTRAG_SPREAD_DEF
}

}  // namespace contextrag
