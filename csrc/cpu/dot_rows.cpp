// dot_rows(E (n, d), q (Q, d), idx (m,) or None) -> (Q, m), out[j, i] = Σ_k E[idx[i], k] · q[j, k]:
// the cosine term of eq. 13 on the rows a query scores (all of them when idx is None), read where
// they lie. NumPy gathered a candidate query's rows into a copy before BLAS's product, and the BLAS
// threads then spin on the second core through the rest of the query.
//
// One summation order everywhere: sixteen lane sums over k ≡ lane (mod 16), added lane 0 … 15, then
// the tail in order; no multiply-add is contracted. The exhaustive and the candidate paths both call
// this, so a candidate's cosine is the same bits as the exhaustive one (query/candidates.py), on
// every machine.
#pragma GCC optimize("fp-contract=off")
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace py = pybind11;

namespace contextrag {
namespace {

constexpr ptrdiff_t kLanes = 16;

inline float dot(const float* __restrict a, const float* __restrict b, ptrdiff_t d) {
  float acc[kLanes] = {0};
  ptrdiff_t k = 0;
  for (; k + kLanes <= d; k += kLanes)
    for (ptrdiff_t l = 0; l < kLanes; ++l) acc[l] += a[k + l] * b[k + l];
  float s = 0.0f;
  for (ptrdiff_t l = 0; l < kLanes; ++l) s += acc[l];
  for (; k < d; ++k) s += a[k] * b[k];
  return s;
}

py::array_t<float> dot_rows(const py::array_t<float, py::array::c_style>& E,
                            const py::array_t<float, py::array::c_style>& q, const py::object& idx_obj) {
  if (E.ndim() != 2 || q.ndim() != 2)
    throw std::invalid_argument("E and q must be 2-D, got " + std::to_string(E.ndim()) + "-D and " +
                                std::to_string(q.ndim()) + "-D");
  const ptrdiff_t n = E.shape(0), d = E.shape(1), Q = q.shape(0);
  if (q.shape(1) != d)
    throw std::invalid_argument("q must have E's " + std::to_string(d) + " columns, got " +
                                std::to_string(q.shape(1)));
  const int64_t* idx = nullptr;
  ptrdiff_t m = n;
  py::array_t<int64_t, py::array::c_style> keep;
  if (!idx_obj.is_none()) {
    keep = py::array_t<int64_t, py::array::c_style>::ensure(idx_obj);
    if (!keep || keep.ndim() != 1) throw std::invalid_argument("idx must be a 1-D int64 array or None");
    idx = keep.data();
    m = keep.shape(0);
    for (ptrdiff_t i = 0; i < m; ++i)
      if (idx[i] < 0 || idx[i] >= n)
        throw std::invalid_argument("idx must hold row indices in [0, " + std::to_string(n) + "), got " +
                                    std::to_string(idx[i]));
  }
  py::array_t<float> out({Q, m});
  float* o = out.mutable_data();
  const float* e = E.data();
  const float* qq = q.data();
  py::gil_scoped_release nogil;
#pragma omp parallel for schedule(static) if (m * d * Q >= (1 << 20))
  for (ptrdiff_t i = 0; i < m; ++i) {
    if (idx != nullptr && i + 4 < m) {      // the rows are scattered: fetch a later one meanwhile
      const char* nx = reinterpret_cast<const char*>(e + idx[i + 4] * d);
      for (ptrdiff_t b = 0; b < d * static_cast<ptrdiff_t>(sizeof(float)); b += 64)
        __builtin_prefetch(nx + b, 0, 0);
    }
    const float* r = e + (idx != nullptr ? idx[i] : i) * d;
    for (ptrdiff_t j = 0; j < Q; ++j) o[j * m + i] = dot(r, qq + j * d, d);
  }
  return out;
}

}  // namespace

void register_dot_rows(py::module_& m) {
  m.def("dot_rows", &dot_rows, py::arg("E").noconvert(), py::arg("q").noconvert(), py::arg("idx") = py::none(),
        "out[j, i] = Σ_k E[idx[i], k] · q[j, k] (every row of E when idx is None), float32, in one fixed "
        "summation order.");
}

}  // namespace contextrag
