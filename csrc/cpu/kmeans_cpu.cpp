// K-means helpers that torch's CPU ops do serially or with an extra pass.
//
// kmeans_epilogue / fcm_epilogue: the row-wise step after one distance GEMM tile
// G = ‖c‖² − 2 x·c (b, k). torch's min(dim=1) over short rows is slow on the CPU and its tie order
// is unspecified; here each row takes the first minimum, then the distance to that centre is
// recomputed directly as Σ (x − c)² (exact up to one rounding per term, no cancellation), so
// inertia is accurate and a point on a centre is recognised exactly (FCM's one-hot row).
//
// centroid_sums(X, labels, k): per-cluster sums (k, d) and counts (k,) in one parallel pass. Each
// thread accumulates a private (k, d) block over a contiguous slice of rows, then the blocks are
// added in thread order (deterministic for a fixed thread count). torch's index_add_ on the CPU
// serialises over rows sharing a cluster; this runs at memory bandwidth on all cores.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <limits>
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


template <class T>
static inline T exact_sq(const T* x, const T* c, ptrdiff_t d) {
  T acc = T(0);
#pragma omp simd reduction(+ : acc)
  for (ptrdiff_t j = 0; j < d; ++j) {
    const T t = x[j] - c[j];
    acc += t * t;
  }
  return acc;
}

template <class T>
static inline ptrdiff_t row_argmin(const T* g, ptrdiff_t k) {
  T m = g[0];
#pragma omp simd reduction(min : m)
  for (ptrdiff_t j = 0; j < k; ++j) m = g[j] < m ? g[j] : m;
  ptrdiff_t j = 0;
  while (g[j] != m) ++j;  // first index attaining the minimum
  return j;
}

template <class T>
static void kmeans_epilogue_typed(const py::array& G_, const py::array& X_, const py::array& C_,
                                  py::array_t<int64_t>& lab_, py::array& d2_, const T* xn) {
  const ptrdiff_t b = G_.shape(0), k = G_.shape(1), d = X_.shape(1);
  const T* Gm = static_cast<const T*>(G_.data());
  const T* X = static_cast<const T*>(X_.data());
  const T* C = static_cast<const T*>(C_.data());
  int64_t* lab = lab_.mutable_data();
  T* d2 = static_cast<T*>(d2_.mutable_data());
  py::gil_scoped_release nogil;
#pragma omp parallel for schedule(static)
  for (ptrdiff_t i = 0; i < b; ++i) {
    const ptrdiff_t j = row_argmin(Gm + i * k, k);
    lab[i] = j;
    if (xn) {  // GEMM form ‖x‖² + G_min (inside Lloyd iterations: no pass over X)
      const T t = xn[i] + Gm[i * k + j];
      d2[i] = t > T(0) ? t : T(0);
      continue;
    }
    // accumulated in double (as assigned_sq_dist), so both Lloyd loops see the same inertia
    const T* x = X + i * d;
    const T* c = C + j * d;
    double acc = 0.0;
#pragma omp simd reduction(+ : acc)
    for (ptrdiff_t t = 0; t < d; ++t) {
      const double v = (double)x[t] - (double)c[t];
      acc += v * v;
    }
    d2[i] = (T)acc;
  }
}

template <class T>
static void fcm_epilogue_typed(const py::array& G_, const py::array& X_, const py::array& C_, const py::array& xn_,
                               double m, py::array& U_) {
  const ptrdiff_t b = G_.shape(0), c = G_.shape(1), d = X_.shape(1);
  const T* Gm = static_cast<const T*>(G_.data());
  const T* X = static_cast<const T*>(X_.data());
  const T* C = static_cast<const T*>(C_.data());
  const T* xn = static_cast<const T*>(xn_.data());
  T* U = static_cast<T*>(U_.mutable_data());
  const T p = T(1.0 / (m - 1.0));
  py::gil_scoped_release nogil;
#pragma omp parallel for schedule(static)
  for (ptrdiff_t i = 0; i < b; ++i) {
    const T* g = Gm + i * c;
    T* u = U + i * c;
    const T* x = X + i * d;
    // u holds the squared distances first: clamp the GEMM form at 0, exact for the nearest centre
    // and for any other the cancellation drove to 0.
    for (ptrdiff_t j = 0; j < c; ++j) { const T t = g[j] + xn[i]; u[j] = t > T(0) ? t : T(0); }
    const ptrdiff_t js = row_argmin(g, c);
    u[js] = exact_sq(x, C + js * d, d);
    for (ptrdiff_t j = 0; j < c; ++j)
      if (j != js && u[j] <= T(0)) u[j] = exact_sq(x, C + j * d, d);
    const ptrdiff_t jm = row_argmin(u, c);
    const T dmin = u[jm];
    if (dmin <= T(0)) {  // the point sits on a centre: one-hot on the first such centre
      for (ptrdiff_t j = 0; j < c; ++j) u[j] = T(0);
      u[jm] = T(1);
      continue;
    }
    T sum = T(0);
    if (p == T(1)) {
      for (ptrdiff_t j = 0; j < c; ++j) { u[j] = dmin / u[j]; sum += u[j]; }
    } else {
      for (ptrdiff_t j = 0; j < c; ++j) { u[j] = std::pow(dmin / u[j], p); sum += u[j]; }
    }
    const T inv = T(1) / sum;
    for (ptrdiff_t j = 0; j < c; ++j) u[j] *= inv;
  }
}

static void check2(const py::array& a, const char* name) {
  if (a.ndim() != 2 || !(a.flags() & py::array::c_style))
    throw std::invalid_argument(std::string(name) + " must be a C-contiguous 2-D array");
}

// kmeans_epilogue(G (b,k), X (b,d), C (k,d), labels_out (b,) int64, d2_out (b,)): in place.
static void kmeans_epilogue(const py::array& G, const py::array& X, const py::array& C,
                            py::array_t<int64_t> labels, py::array d2, py::object xn_obj) {
  py::array xn;  // a default py::array is a real (empty) array, so track presence separately
  const bool has_xn = !xn_obj.is_none();
  if (has_xn) {
    xn = py::array::ensure(xn_obj);
    if (!xn || xn.ndim() != 1 || xn.shape(0) != G.shape(0) || !(xn.flags() & py::array::c_style) ||
        !xn.dtype().is(G.dtype()))
      throw std::invalid_argument("xn must be a contiguous (b,) array of G's dtype");
  }
  check2(G, "G"); check2(X, "X"); check2(C, "C");
  if (G.shape(0) != X.shape(0) || G.shape(1) != C.shape(0) || X.shape(1) != C.shape(1) || G.shape(1) < 1)
    throw std::invalid_argument("shapes must be G (b, k), X (b, d), C (k, d) with k >= 1");
  if (labels.ndim() != 1 || labels.shape(0) != G.shape(0) || d2.ndim() != 1 || d2.shape(0) != G.shape(0) ||
      !(d2.flags() & py::array::c_style) || !(labels.flags() & py::array::c_style))
    throw std::invalid_argument("labels and d2 must be contiguous (b,) arrays");
  if (!G.dtype().is(X.dtype()) || !G.dtype().is(C.dtype()) || !G.dtype().is(d2.dtype()))
    throw py::type_error("G, X, C and d2 must share one dtype");
  if (G.dtype().is(py::dtype::of<float>()))
    return kmeans_epilogue_typed<float>(G, X, C, labels, d2, has_xn ? static_cast<const float*>(xn.data()) : nullptr);
  if (G.dtype().is(py::dtype::of<double>()))
    return kmeans_epilogue_typed<double>(G, X, C, labels, d2, has_xn ? static_cast<const double*>(xn.data()) : nullptr);
  throw py::type_error("G must be float32 or float64");
}

// fcm_epilogue(G (b,c), X (b,d), C (c,d), xn (b,), m, U_out (b,c)): memberships in place.
static void fcm_epilogue(const py::array& G, const py::array& X, const py::array& C, const py::array& xn,
                         double m, py::array U) {
  check2(G, "G"); check2(X, "X"); check2(C, "C"); check2(U, "U");
  if (G.shape(0) != X.shape(0) || G.shape(1) != C.shape(0) || X.shape(1) != C.shape(1) || G.shape(1) < 1 ||
      U.shape(0) != G.shape(0) || U.shape(1) != G.shape(1) || xn.ndim() != 1 || xn.shape(0) != G.shape(0))
    throw std::invalid_argument("shapes must be G (b, c), X (b, d), C (c, d), xn (b,), U (b, c)");
  if (!(m > 1.0)) throw std::invalid_argument("m must be > 1");
  for (const py::array* a : {&X, &C, &xn, static_cast<const py::array*>(&U)})
    if (!G.dtype().is(a->dtype())) throw py::type_error("G, X, C, xn and U must share one dtype");
  if (G.dtype().is(py::dtype::of<float>())) return fcm_epilogue_typed<float>(G, X, C, xn, m, U);
  if (G.dtype().is(py::dtype::of<double>())) return fcm_epilogue_typed<double>(G, X, C, xn, m, U);
  throw py::type_error("G must be float32 or float64");
}

// ---- bounded (Hamerly) Lloyd support -------------------------------------------------------
// assigned_sq_dist(X, C, labels) -> (n,) float64: ‖x_i − c_{labels_i}‖² accumulated in double.
template <class T>
static py::array_t<double> assigned_typed(const py::array& X_, const py::array& C_, const int64_t* lab) {
  const ptrdiff_t n = X_.shape(0), d = X_.shape(1), k = C_.shape(0);
  const T* X = static_cast<const T*>(X_.data());
  const T* C = static_cast<const T*>(C_.data());
  py::array_t<double> out(n);
  double* o = out.mutable_data();
  bool bad = false;
  {
    py::gil_scoped_release nogil;
#pragma omp parallel for schedule(static) reduction(|| : bad)
    for (ptrdiff_t i = 0; i < n; ++i) {
      const int64_t j = lab[i];
      if (j < 0 || j >= k) { bad = true; o[i] = 0; continue; }
      const T* x = X + i * d;
      const T* c = C + j * d;
      double acc = 0.0;
#pragma omp simd reduction(+ : acc)
      for (ptrdiff_t t = 0; t < d; ++t) {
        const double v = (double)x[t] - (double)c[t];
        acc += v * v;
      }
      o[i] = acc;
    }
  }
  if (bad) throw std::invalid_argument("labels must lie in [0, k)");
  return out;
}

static py::array_t<double> assigned_sq_dist(const py::array& X, const py::array& C, const py::array_t<int64_t>& labels) {
  check2(X, "X"); check2(C, "C");
  if (X.shape(1) != C.shape(1)) throw std::invalid_argument("X and C must have the same number of columns");
  if (labels.ndim() != 1 || labels.shape(0) != X.shape(0) || !(labels.flags() & py::array::c_style))
    throw std::invalid_argument("labels must be a contiguous (n,) int64 array");
  if (!X.dtype().is(C.dtype())) throw py::type_error("X and C must share one dtype");
  if (X.dtype().is(py::dtype::of<float>())) return assigned_typed<float>(X, C, labels.data());
  if (X.dtype().is(py::dtype::of<double>())) return assigned_typed<double>(X, C, labels.data());
  throw py::type_error("X must be float32 or float64");
}

// kmeans_top2(G (b,k), X (b,d), C (k,d)) -> (labels int64, d2 float64 exact, g2 float64):
// first argmin of G, the exact squared distance to it (double accumulation), and the second
// smallest G value (GEMM form, for a lower bound on the distance to every other centre).
template <class T>
static py::tuple top2_typed(const py::array& G_, const py::array& X_, const py::array& C_) {
  const ptrdiff_t b = G_.shape(0), k = G_.shape(1), d = X_.shape(1);
  const T* Gm = static_cast<const T*>(G_.data());
  const T* X = static_cast<const T*>(X_.data());
  const T* C = static_cast<const T*>(C_.data());
  py::array_t<int64_t> lab(b);
  py::array_t<double> d2(b), g2(b);
  int64_t* L = lab.mutable_data();
  double* D = d2.mutable_data();
  double* S = g2.mutable_data();
  {
    py::gil_scoped_release nogil;
#pragma omp parallel for schedule(static)
    for (ptrdiff_t i = 0; i < b; ++i) {
      const T* g = Gm + i * k;
      const ptrdiff_t j = row_argmin(g, k);
      T second = std::numeric_limits<T>::infinity();
      for (ptrdiff_t t = 0; t < k; ++t)
        if (t != j && g[t] < second) second = g[t];
      L[i] = j;
      S[i] = (double)second;
      const T* x = X + i * d;
      const T* c = C + j * d;
      double acc = 0.0;
#pragma omp simd reduction(+ : acc)
      for (ptrdiff_t t = 0; t < d; ++t) {
        const double v = (double)x[t] - (double)c[t];
        acc += v * v;
      }
      D[i] = acc;
    }
  }
  return py::make_tuple(lab, d2, g2);
}

static py::tuple kmeans_top2(const py::array& G, const py::array& X, const py::array& C) {
  check2(G, "G"); check2(X, "X"); check2(C, "C");
  if (G.shape(0) != X.shape(0) || G.shape(1) != C.shape(0) || X.shape(1) != C.shape(1) || G.shape(1) < 1)
    throw std::invalid_argument("shapes must be G (b, k), X (b, d), C (k, d) with k >= 1");
  if (!G.dtype().is(X.dtype()) || !G.dtype().is(C.dtype())) throw py::type_error("G, X and C must share one dtype");
  if (G.dtype().is(py::dtype::of<float>())) return top2_typed<float>(G, X, C);
  if (G.dtype().is(py::dtype::of<double>())) return top2_typed<double>(G, X, C);
  throw py::type_error("G must be float32 or float64");
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
  m.def("assigned_sq_dist", &assigned_sq_dist, py::arg("X"), py::arg("C"), py::arg("labels"),
        "‖x_i − C[labels_i]‖² in float64, in parallel.");
  m.def("kmeans_top2", &kmeans_top2, py::arg("G"), py::arg("X"), py::arg("C"),
        "(labels, exact d2 to the nearest, second-smallest G) per row of G = ‖c‖² − 2x·c.");
  m.def("kmeans_epilogue", &kmeans_epilogue, py::arg("G"), py::arg("X"), py::arg("C"), py::arg("labels"),
        py::arg("d2"), py::arg("xn") = py::none(), "Row argmin of G = ‖c‖² − 2x·c (first on ties) and the exact squared distance, in place.");
  m.def("fcm_epilogue", &fcm_epilogue, py::arg("G"), py::arg("X"), py::arg("C"), py::arg("xn"), py::arg("m"),
        py::arg("U"), "FCM memberships from G = ‖c‖² − 2x·c and ‖x‖², written into U (one-hot on a centre).");
}

}  // namespace contextrag
