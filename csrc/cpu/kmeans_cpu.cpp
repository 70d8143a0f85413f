// K-means helpers that torch's CPU ops do serially or with an extra pass.
//
// centroid_sums(X, labels, k): per-cluster sums (k, d) and counts (k,) in one parallel pass. Each
// thread accumulates a private (k, d) block over a contiguous slice of rows, then the blocks are
// added in thread order (deterministic for a fixed thread count). torch's index_add_ on the CPU
// serialises over rows sharing a cluster; this runs at memory bandwidth on all cores.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <omp.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;

namespace contextrag {
namespace {

template <class T>
static py::tuple centroid_sums_typed(const py::array& X_, const int64_t* lab, ptrdiff_t k) {
  const ptrdiff_t n = X_.shape(0), d = X_.shape(1);
  const T* X = static_cast<const T*>(X_.data());
  py::array_t<T> sums({k, d});
  py::array_t<int64_t> counts(k);
  T* S = sums.mutable_data();
  int64_t* C = counts.mutable_data();
  bool bad = false;
  {
    py::gil_scoped_release nogil;
    const int nt = omp_get_max_threads();
    std::vector<T> part((size_t)nt * (size_t)(k * d), T(0));
    std::vector<int64_t> cpart((size_t)nt * (size_t)k, 0);
#pragma omp parallel num_threads(nt) reduction(|| : bad)
    {
      const int t = omp_get_thread_num();
      T* P = part.data() + (size_t)t * (size_t)(k * d);
      int64_t* Cp = cpart.data() + (size_t)t * (size_t)k;
#pragma omp for schedule(static)
      for (ptrdiff_t i = 0; i < n; ++i) {
        const int64_t c = lab[i];
        if (c < 0 || c >= k) { bad = true; continue; }
        T* dst = P + c * d;
        const T* src = X + i * d;
#pragma omp simd
        for (ptrdiff_t j = 0; j < d; ++j) dst[j] += src[j];
        Cp[c] += 1;
      }
    }
    // Reduce the private blocks: parallel over the (k·d) entries, threads' parts in fixed order.
#pragma omp parallel for schedule(static)
    for (ptrdiff_t e = 0; e < k * d; ++e) {
      T acc = T(0);
      for (int t = 0; t < nt; ++t) acc += part[(size_t)t * (size_t)(k * d) + (size_t)e];
      S[e] = acc;
    }
    for (ptrdiff_t c = 0; c < k; ++c) {
      int64_t acc = 0;
      for (int t = 0; t < nt; ++t) acc += cpart[(size_t)t * (size_t)k + (size_t)c];
      C[c] = acc;
    }
  }
  if (bad) throw std::invalid_argument("labels must lie in [0, k)");
  return py::make_tuple(sums, counts);
}

static py::tuple centroid_sums(const py::array& X, const py::array_t<int64_t>& labels, int64_t k) {
  if (X.ndim() != 2 || !(X.flags() & py::array::c_style))
    throw std::invalid_argument("X must be a C-contiguous 2-D array");
  if (labels.ndim() != 1 || labels.shape(0) != X.shape(0))
    throw std::invalid_argument("labels must be 1-D with one entry per row of X");
  if (k < 1) throw std::invalid_argument("k must be >= 1");
  if (X.dtype().is(py::dtype::of<float>())) return centroid_sums_typed<float>(X, labels.data(), k);
  if (X.dtype().is(py::dtype::of<double>())) return centroid_sums_typed<double>(X, labels.data(), k);
  throw py::type_error("X must be float32 or float64");
}

}  // namespace

void register_kmeans(py::module_& m) {
  m.def("centroid_sums", &centroid_sums, py::arg("X"), py::arg("labels"), py::arg("k"),
        "Per-cluster sums (k, d) and counts (k,) of the rows of X, in parallel.");
}

}  // namespace contextrag
