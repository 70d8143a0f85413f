// indices_above(h, thr, strict): the ascending indices i with h[i] >= thr (h[i] > thr when strict),
// for a query's (n,) float32 scores. NumPy's flatnonzero(h >= thr) writes an (n,) mask and counts it
// before it fills the indices: three passes over a million items where the answer is a few thousand.
// Here the scores are read once, sixteen at a time: a block with no hit (nearly all) costs one
// vectorised compare, and the indices of a block with hits are appended in order. NaN never passes,
// as in NumPy's comparison.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;

namespace contextrag {
namespace {

template <bool Strict>
void select_above(const float* h, ptrdiff_t n, float t, std::vector<int64_t>& out) {
  constexpr ptrdiff_t B = 16;
  ptrdiff_t i = 0;
  for (; i + B <= n; i += B) {
    int any = 0;
    for (ptrdiff_t j = 0; j < B; ++j) any |= Strict ? (h[i + j] > t) : (h[i + j] >= t);
    if (!any) continue;
    for (ptrdiff_t j = 0; j < B; ++j)
      if (Strict ? (h[i + j] > t) : (h[i + j] >= t)) out.push_back(i + j);
  }
  for (; i < n; ++i)
    if (Strict ? (h[i] > t) : (h[i] >= t)) out.push_back(i);
}

py::array_t<int64_t> indices_above(const py::array_t<float, py::array::c_style>& h, float thr, bool strict) {
  if (h.ndim() != 1) throw std::invalid_argument("h must be 1-D, got " + std::to_string(h.ndim()) + "-D");
  std::vector<int64_t> got;
  {
    py::gil_scoped_release nogil;
    if (strict) select_above<true>(h.data(), h.shape(0), thr, got);
    else select_above<false>(h.data(), h.shape(0), thr, got);
  }
  py::array_t<int64_t> out(static_cast<ptrdiff_t>(got.size()));
  if (!got.empty()) std::memcpy(out.mutable_data(), got.data(), got.size() * sizeof(int64_t));
  return out;
}

}  // namespace

void register_select(py::module_& m) {
  m.def("indices_above", &indices_above, py::arg("h").noconvert(), py::arg("thr"), py::arg("strict") = false,
        "The ascending indices i of the float32 vector h with h[i] >= thr (h[i] > thr when strict).");
}

}  // namespace contextrag
