// bm25_accumulate: one query token's BM25 terms added into the (n,) float32 scores, read from its
// postings where they lie (index/bm25_index.py's CountBM25). NumPy made six passes over gathered
// copies per token and a scatter-add; at a million items that was a tenth of a query.
//
// The arithmetic is CountBM25.get_scores's, operation for operation in float64 (bm25s's Lucene
// variant): norm = k1 · ((1 − b) + b · dl / avgdl), then idf · tf / (norm + tf), rounded to float32
// and added to the item's float32 score. No multiply-add is contracted (fp-contract off), so the
// result is the same bits as the NumPy form (tested).
#pragma GCC optimize("fp-contract=off")
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace py = pybind11;

namespace contextrag {
namespace {

template <class L>
void accumulate(float* out, const int32_t* rows, const int32_t* tf, ptrdiff_t m, const L* dl, int64_t row0,
                double idf, double avg, double k1, double b) {
  const double one_b = 1.0 - b;
  for (ptrdiff_t i = 0; i < m; ++i) {
    const int64_t r = row0 + rows[i];
    const double t = static_cast<double>(tf[i]);
    double d = k1 * (one_b + b * static_cast<double>(dl[r]) / avg);
    d += t;
    d = t / d;
    d *= idf;
    out[r] += static_cast<float>(d);
  }
}

void bm25_accumulate(py::array_t<float, py::array::c_style> out, py::array_t<int32_t, py::array::c_style> rows,
                     py::array_t<int32_t, py::array::c_style> tf, py::array dl, int64_t row0, float idf, double avg,
                     double k1, double b) {
  if (out.ndim() != 1 || rows.ndim() != 1 || tf.ndim() != 1 || dl.ndim() != 1)
    throw std::invalid_argument("out, rows, tf and dl must be 1-D");
  const ptrdiff_t m = rows.shape(0), n = out.shape(0);
  if (tf.shape(0) != m)
    throw std::invalid_argument("rows and tf must have the same length, got " + std::to_string(m) + " and " +
                                std::to_string(tf.shape(0)));
  if (dl.shape(0) != n) throw std::invalid_argument("dl must have one length per item of out");
  if (!(dl.flags() & py::array::c_style)) throw std::invalid_argument("dl must be C-contiguous");
  const int32_t* r = rows.data();
  for (ptrdiff_t i = 0; i < m; ++i)
    if (r[i] < 0 || row0 + r[i] >= n)
      throw std::invalid_argument("rows + row0 must lie in [0, " + std::to_string(n) + "), got " +
                                  std::to_string(row0 + r[i]));
  const bool u16 = dl.dtype().is(py::dtype::of<uint16_t>()), u32 = dl.dtype().is(py::dtype::of<uint32_t>());
  if (!u16 && !u32 && !dl.dtype().is(py::dtype::of<int64_t>()))
    throw py::type_error("dl must be uint16, uint32 or int64");
  float* o = out.mutable_data();
  const int32_t* f = tf.data();
  const void* len = dl.data();
  py::gil_scoped_release nogil;
  if (u16) accumulate(o, r, f, m, static_cast<const uint16_t*>(len), row0, idf, avg, k1, b);
  else if (u32) accumulate(o, r, f, m, static_cast<const uint32_t*>(len), row0, idf, avg, k1, b);
  else accumulate(o, r, f, m, static_cast<const int64_t*>(len), row0, idf, avg, k1, b);
}

}  // namespace

void register_bm25(py::module_& m) {
  m.def("bm25_accumulate", &bm25_accumulate, py::arg("out").noconvert(), py::arg("rows").noconvert(),
        py::arg("tf").noconvert(), py::arg("dl"), py::arg("row0"), py::arg("idf"), py::arg("avg"), py::arg("k1"),
        py::arg("b"),
        "out[row0 + rows[i]] += float32(idf · tf / (k1 (1 − b + b dl/avg) + tf)) for one token's postings, "
        "in float64 as CountBM25.get_scores computes it.");
}

}  // namespace contextrag
