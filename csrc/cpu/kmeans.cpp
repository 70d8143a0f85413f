// K-means helpers that torch's CPU ops do serially or with an extra pass.
//
// kmeans_epilogue: the row-wise step after one distance GEMM tile G = ‖c‖² − 2 x·c (b, k).
// torch's min(dim=1) over short rows is slow on the CPU and its tie order is unspecified; here each
// row takes the first minimum, then the distance to that centre is recomputed directly as Σ (x − c)²
// (no cancellation), so inertia is accurate and a point on a centre is recognised exactly.
//
// centroid_sums(X, labels, k, float64_sums): per-cluster sums (k, d) and counts (k,) in one
// parallel pass. Each thread accumulates a private (k, d) block over a contiguous slice of rows,
// then the blocks are added in thread order (deterministic for a fixed thread count). torch's
// index_add_ on the CPU serialises over rows sharing a cluster; this runs at memory bandwidth.
//
// elkan_filter / elkan_refresh: the bounded Lloyd loop's state checks, OpenMP regions and ISA
// dispatch for its row loops (elkan_rows.h); gather_rows and sq_dist_to serve the same loop.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <omp.h>

#include "isa.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;

namespace contextrag {
// elkan_rows.h, compiled per instruction set (cluster_rows_{avx512,avx2,generic}.cpp)
#define CR_DECLARE_ELKAN_T(ns, T, sfx)                                                                 \
  namespace ns {                                                                                      \
  ptrdiff_t elkan_filter_range_##sfx(const T*, const T*, ptrdiff_t, ptrdiff_t, const int64_t*, double*, \
                                     int32_t*, const float*, const int32_t*, const float*, const float*, \
                                     const float*, const double*, int32_t, ptrdiff_t, ptrdiff_t, int64_t*); \
  void elkan_refresh_range_##sfx(const T*, const T*, const T*, ptrdiff_t, ptrdiff_t, const double*,      \
                                 const int64_t*, ptrdiff_t, int64_t*, double*, float*, int32_t*, int32_t*, \
                                 float*, int32_t, double, double, double, double, ptrdiff_t, ptrdiff_t);  \
  void pp_rows_##sfx(const T*, ptrdiff_t, const int64_t*, ptrdiff_t, const T*, T*, double*, ptrdiff_t, ptrdiff_t,   \
                     const unsigned char*);                                                                      \
  int sum_rows_##sfx(const T*, ptrdiff_t, const int64_t*, ptrdiff_t, ptrdiff_t, ptrdiff_t, T*, int64_t*);        \
  void subtract_rows_##sfx(T*, const T*, const int64_t*, ptrdiff_t, ptrdiff_t, ptrdiff_t, double*);              \
  }
#define CR_DECLARE_ELKAN(ns)                                                                           \
  CR_DECLARE_ELKAN_T(ns, float, f32) CR_DECLARE_ELKAN_T(ns, double, f64)                               \
  namespace ns {                                                                                       \
  int sum_rows_f32_f64(const float*, ptrdiff_t, const int64_t*, ptrdiff_t, ptrdiff_t, ptrdiff_t, double*, \
                       int64_t*);                                                                      \
  }
CR_DECLARE_ELKAN(generic)
#if defined(__x86_64__) || defined(__i386__)
CR_DECLARE_ELKAN(avx2)
CR_DECLARE_ELKAN(avx512)
#endif
#undef CR_DECLARE_ELKAN
#undef CR_DECLARE_ELKAN_T

template <class T> struct ElkanFns;
template <> struct ElkanFns<float> {
  static auto filter(Isa v) { return CR_PICK_ISA(v, elkan_filter_range_f32); }
  static auto refresh(Isa v) { return CR_PICK_ISA(v, elkan_refresh_range_f32); }
  static auto pp(Isa v) { return CR_PICK_ISA(v, pp_rows_f32); }
  static auto subtract(Isa v) { return CR_PICK_ISA(v, subtract_rows_f32); }
};
template <> struct ElkanFns<double> {
  static auto filter(Isa v) { return CR_PICK_ISA(v, elkan_filter_range_f64); }
  static auto refresh(Isa v) { return CR_PICK_ISA(v, elkan_refresh_range_f64); }
  static auto pp(Isa v) { return CR_PICK_ISA(v, pp_rows_f64); }
  static auto subtract(Isa v) { return CR_PICK_ISA(v, subtract_rows_f64); }
};

namespace {

// Threads for a parallel region of about `work` element operations: one per ~4M (a millisecond or
// so on one core), at most all. Every region ends in a barrier, and on a machine shared with other
// jobs a barrier waits for any preempted thread's next time slice (several ms): the bounded loop's
// bookkeeping on a training sample (24k rows) spent more time in such waits than working, profiled.
static int region_threads(double work) {
  const int mx = omp_get_max_threads();
  const double nt = work / (double)(1 << 22);
  return nt < 1.0 ? 1 : nt >= (double)mx ? mx : (int)nt;
}

// The per-ISA row-sum loop for rows of T into sums of A.
template <class T, class A> struct SumRows;
template <> struct SumRows<float, double> {
  static auto fn(Isa v) { return CR_PICK_ISA(v, sum_rows_f32_f64); }
};
template <> struct SumRows<float, float> {
  static auto fn(Isa v) { return CR_PICK_ISA(v, sum_rows_f32); }
};
template <> struct SumRows<double, double> {
  static auto fn(Isa v) { return CR_PICK_ISA(v, sum_rows_f64); }
};

template <class T, class A = T>
static py::tuple centroid_sums_typed(const py::array& X_, const int64_t* lab, ptrdiff_t k) {
  const ptrdiff_t n = X_.shape(0), d = X_.shape(1);
  const T* X = static_cast<const T*>(X_.data());
  py::array_t<A> sums({k, d});
  py::array_t<int64_t> counts(k);
  A* S = sums.mutable_data();
  int64_t* C = counts.mutable_data();
  bool bad = false;
  {
    py::gil_scoped_release nogil;
    // one block per thread, whatever the size: the Ray build reproduces this split of the rows to
    // give the same sums (distributed.kmeans.reduction_plan: libgomp's static split, the first
    // n % nt blocks one row longer). Small inputs fill the same blocks on the calling thread (same
    // additions, same bits) instead of waiting on a parallel region's barrier.
    const int nt = omp_get_max_threads();
    std::vector<A> part((size_t)nt * (size_t)(k * d), A(0));
    std::vector<int64_t> cpart((size_t)nt * (size_t)k, 0);
    const ptrdiff_t q = n / nt, r = n % nt;
    const auto rows = SumRows<T, A>::fn(cpu_isa());
    auto block = [&](int t) {
      const ptrdiff_t lo = t * q + (t < r ? t : r), hi = lo + q + (t < r ? 1 : 0);
      return rows(X, d, lab, k, lo, hi, part.data() + (size_t)t * (size_t)(k * d),
                  cpart.data() + (size_t)t * (size_t)k) != 0;
    };
    if (region_threads((double)n * (double)d) == 1) {
      for (int t = 0; t < nt; ++t) bad = block(t) || bad;
    } else {
#pragma omp parallel num_threads(nt) reduction(|| : bad)
      for (int t = omp_get_thread_num(); t < nt; t += omp_get_num_threads()) bad = block(t) || bad;
    }
    // Reduce the private blocks: parallel over the (k·d) entries, threads' parts in fixed order.
#pragma omp parallel for schedule(static) num_threads(region_threads((double)(k * d) * nt))
    for (ptrdiff_t e = 0; e < k * d; ++e) {
      A acc = A(0);
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
static inline ptrdiff_t row_argmin(const T* g, ptrdiff_t k) {
  T m = g[0];
#pragma omp simd reduction(min : m)
  for (ptrdiff_t j = 0; j < k; ++j) m = g[j] < m ? g[j] : m;
  ptrdiff_t j = 0;
  while (j + 1 < k && g[j] != m) ++j;  // first index attaining the minimum (bounded: a NaN row stops at k - 1)
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
#pragma omp parallel for schedule(static) num_threads(region_threads((double)b * (double)(k + (xn ? 0 : d))))
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

// ---- bounded (Elkan) Lloyd support ---------------------------------------------------------
// Per point i: labels[i] = a, upper[i] ≥ ‖x_i − c_a‖ (float64), and a row L[i, :] (float32) with
// L[i, j] ≤ ‖x_i − c_j‖ for every j ≠ a and L[i, a] = +inf. Every rounding below is directed so
// the bounds stay bounds: lower bounds are shrunk by a few ulps, upper bounds grown.
// elkan_filter: the bounds of row i were computed at epoch lep[i] (L) and uep[i] (upper); disp
// (E, k) holds ‖c_j(now) − c_j(epoch e)‖, the displacement of each centre since each epoch (not the
// path length Σδ: in high dimension centres wander, and their net displacement grows far slower).
// Returns the rows whose nearest centre may have changed (ascending). A row whose loosened upper
// bound fails the test first gets its exact distance to c_a (stored as of `now`); only if that
// still fails is it active. L itself is only read.
template <class T>
static py::array_t<int64_t> elkan_filter_typed(const py::array& X_, const py::array& C_, const int64_t* lab,
                                               double* upper, int32_t* uep, const float* L, const int32_t* lep,
                                               const float* lmin, const double* disp, ptrdiff_t E, int32_t now) {
  const ptrdiff_t n = X_.shape(0), d = X_.shape(1), k = C_.shape(0);
  const T* X = static_cast<const T*>(X_.data());
  const T* C = static_cast<const T*>(C_.data());
  std::vector<float> dl((size_t)(E * k));
  for (ptrdiff_t e = 0; e < E * k; ++e) {  // displacements rounded up to float
    float f = (float)disp[e];
    if ((double)f < disp[e]) f = std::nextafter(f, std::numeric_limits<float>::infinity());
    dl[(size_t)e] = f;
  }
  std::vector<float> dmax((size_t)E, 0.0f);
  for (ptrdiff_t e = 0; e < E; ++e)
    for (ptrdiff_t j = 0; j < k; ++j) dmax[(size_t)e] = std::max(dmax[(size_t)e], dl[(size_t)(e * k + j)]);
  const int nt = region_threads((double)n * (double)k);
  std::vector<std::vector<int64_t>> parts((size_t)nt);
  auto fn = ElkanFns<T>::filter(cpu_isa());
  {
    py::gil_scoped_release nogil;
#pragma omp parallel num_threads(nt)
    {
      // contiguous slices in thread order, so the concatenation below is sorted
      const ptrdiff_t t = omp_get_thread_num(), lo = n * t / nt, hi = n * (t + 1) / nt;
      std::vector<int64_t>& mine = parts[(size_t)t];
      mine.resize((size_t)(hi - lo));
      mine.resize((size_t)fn(X, C, d, k, lab, upper, uep, L, lep, lmin, dl.data(), dmax.data(), disp, now, lo, hi,
                             mine.data()));
    }
  }
  size_t total = 0;
  for (auto& p : parts) total += p.size();
  py::array_t<int64_t> out((ptrdiff_t)total);
  int64_t* o = out.mutable_data();
  for (auto& p : parts) {  // static schedule: thread t holds the t-th contiguous slice, so this is sorted
    std::copy(p.begin(), p.end(), o);
    o += p.size();
  }
  return out;
}

// elkan_refresh: rows `rows` of X were evaluated against all centres, G (b, k) = ‖c‖² − 2x·c.
// Writes their label (first argmin of G, as the plain loop), exact upper bound and fresh lower
// bounds sqrt(max(0, G + ‖x‖² − slack)), slack = γ(‖x‖² + max‖c‖²) covering the GEMM's rounding.
template <class T>
static void elkan_refresh_typed(const py::array& G_, const py::array& X_, const py::array& C_, const double* xn2,
                                const int64_t* rows, ptrdiff_t row0, int64_t* lab, double* upper, float* L,
                                int32_t* uep, int32_t* lep, float* lmin, int32_t now, double gamma, double cmax,
                                double eb, double cnorm) {
  const ptrdiff_t b = G_.shape(0), k = G_.shape(1), d = X_.shape(1);
  const T* Gm = static_cast<const T*>(G_.data());
  const T* X = static_cast<const T*>(X_.data());
  const T* C = static_cast<const T*>(C_.data());
  gamma += 8.0 * std::numeric_limits<float>::epsilon();  // the float arithmetic in the row loop
  auto fn = ElkanFns<T>::refresh(cpu_isa());
  py::gil_scoped_release nogil;
  // ~30 operations per distance (the arg-min, the bound, a square root and a store per centre, and
  // the exact re-check of the rows a bf16 bound leaves open): measured 3.5 ns per distance on one
  // core (k = 96, Xeon with AMX), so a bf16 block of 4096 rows is a millisecond's work
#pragma omp parallel num_threads(region_threads(30.0 * (double)b * (double)k))
  {
    const ptrdiff_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    fn(Gm, X, C, d, k, xn2, rows, row0, lab, upper, L, uep, lep, lmin, now, gamma, cmax, eb, cnorm, b * t / nt,
       b * (t + 1) / nt);
  }
}

struct ElkanState {
  py::array_t<int64_t> labels;
  py::array_t<double> upper;
  py::array_t<int32_t> uep, lep;
  py::array_t<float> L;
  py::array_t<float> lmin;
};

// The state is updated in place, so a silent conversion copy would lose the update: dtypes must match.
template <class T>
static py::array_t<T> exact_dtype(py::handle h, const char* name) {
  if (!py::isinstance<py::array_t<T>>(h))
    throw py::type_error(std::string(name) + " must be a numpy array of dtype " + std::string(py::str(py::dtype::of<T>())));
  return py::reinterpret_borrow<py::array_t<T>>(h);
}

static ElkanState check_state(const py::array& X, const py::array& C, const py::tuple& st) {
  check2(X, "X"); check2(C, "C");
  if (st.size() != 6) throw std::invalid_argument("state must be (labels, upper, uep, L, lep, lmin)");
  ElkanState s{exact_dtype<int64_t>(st[0], "labels"), exact_dtype<double>(st[1], "upper"),
               exact_dtype<int32_t>(st[2], "uep"), exact_dtype<int32_t>(st[4], "lep"),
               exact_dtype<float>(st[3], "L"), exact_dtype<float>(st[5], "lmin")};
  const ptrdiff_t n = X.shape(0), k = C.shape(0);
  if (X.shape(1) != C.shape(1)) throw std::invalid_argument("X and C must have the same number of columns");
  auto vec = [n](const py::array& a, const char* name) {
    if (a.ndim() != 1 || a.shape(0) != n || !(a.flags() & py::array::c_style))
      throw std::invalid_argument(std::string(name) + " must be a contiguous (n,) array");
  };
  vec(s.labels, "labels"); vec(s.upper, "upper"); vec(s.uep, "uep"); vec(s.lep, "lep"); vec(s.lmin, "lmin");
  check2(s.L, "L");
  if (s.L.shape(0) != n || s.L.shape(1) != k) throw std::invalid_argument("L must be (n, k) float32");
  if (!X.dtype().is(C.dtype())) throw py::type_error("X and C must share one dtype");
  return s;
}

// state = (labels int64 (n,), upper float64 (n,), uep int32 (n,), L float32 (n, k), lep int32 (n,),
// lmin float32 (n,) = min_{j≠a} L[j]),
// all updated in place; the arrays must be exactly these dtypes (no copies are made).
static py::array_t<int64_t> elkan_filter(const py::array& X, const py::array& C, const py::tuple& state,
                                         const py::array_t<double>& disp, int32_t now) {
  ElkanState s = check_state(X, C, state);
  const ptrdiff_t n = X.shape(0), k = C.shape(0);
  if (disp.ndim() != 2 || disp.shape(1) != k || !(disp.flags() & py::array::c_style))
    throw std::invalid_argument("disp must be a contiguous (E, k) float64 array");
  const ptrdiff_t E = disp.shape(0);
  const int64_t* lab = s.labels.data();
  const int32_t* lep = s.lep.data();
  const int32_t* uep = s.uep.data();
  for (ptrdiff_t i = 0; i < n; ++i)
    if (lab[i] < 0 || lab[i] >= k || lep[i] < 0 || lep[i] >= E || uep[i] < 0 || uep[i] >= E)
      throw std::invalid_argument("labels must lie in [0, k) and epochs in [0, E)");
  if (X.dtype().is(py::dtype::of<float>()))
    return elkan_filter_typed<float>(X, C, lab, s.upper.mutable_data(), s.uep.mutable_data(), s.L.data(), lep,
                                     s.lmin.data(), disp.data(), E, now);
  if (X.dtype().is(py::dtype::of<double>()))
    return elkan_filter_typed<double>(X, C, lab, s.upper.mutable_data(), s.uep.mutable_data(), s.L.data(), lep,
                                      s.lmin.data(), disp.data(), E, now);
  throw py::type_error("X must be float32 or float64");
}

// An optional row list of length b into an n-row X: nullptr for None, else its checked data (kept
// alive by `keep`).
static const int64_t* optional_rows(py::object rows_obj, ptrdiff_t b, ptrdiff_t n, py::array_t<int64_t>& keep) {
  if (rows_obj.is_none()) return nullptr;
  keep = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(rows_obj);
  if (!keep || keep.ndim() != 1 || keep.shape(0) != b)
    throw std::invalid_argument("rows must be a 1-D int64 array of " + std::to_string(b) + " entries");
  const int64_t* rp = keep.data();
  for (ptrdiff_t r = 0; r < b; ++r)
    if (rp[r] < 0 || rp[r] >= n) throw std::invalid_argument("rows must lie in [0, n)");
  return rp;
}

static void elkan_refresh(const py::array& G, const py::array& X, const py::array& C, const py::array_t<double>& xn2,
                          py::object rows_obj, int64_t row0, const py::tuple& state, int32_t now, double gamma,
                          double cmax, double eb, double cnorm) {
  ElkanState s = check_state(X, C, state);
  check2(G, "G");
  if (G.shape(1) != C.shape(0) || !G.dtype().is(X.dtype())) throw std::invalid_argument("G must be (b, k) of X's dtype");
  if (!(eb >= 0.0) || !(cnorm >= 0.0)) throw std::invalid_argument("eb and cnorm must be >= 0");
  if (xn2.ndim() != 1 || xn2.shape(0) != X.shape(0)) throw std::invalid_argument("xn2 must be (n,) float64");
  const ptrdiff_t n = X.shape(0), b = G.shape(0);
  py::array_t<int64_t> rows;
  const int64_t* rp = optional_rows(rows_obj, b, n, rows);
  if (!rp && (row0 < 0 || row0 + b > n)) {
    throw std::invalid_argument("row0 + G.shape[0] must not exceed n");
  }
  if (X.dtype().is(py::dtype::of<float>()))
    return elkan_refresh_typed<float>(G, X, C, xn2.data(), rp, row0, s.labels.mutable_data(), s.upper.mutable_data(),
                                      s.L.mutable_data(), s.uep.mutable_data(), s.lep.mutable_data(), s.lmin.mutable_data(), now, gamma, cmax,
                                      eb, cnorm);
  if (X.dtype().is(py::dtype::of<double>()))
    return elkan_refresh_typed<double>(G, X, C, xn2.data(), rp, row0, s.labels.mutable_data(), s.upper.mutable_data(),
                                       s.L.mutable_data(), s.uep.mutable_data(), s.lep.mutable_data(), s.lmin.mutable_data(), now, gamma, cmax,
                                      eb, cnorm);
  throw py::type_error("X must be float32 or float64");
}

static py::tuple centroid_sums(const py::array& X, const py::array_t<int64_t>& labels, int64_t k, bool float64_sums) {
  if (X.ndim() != 2 || !(X.flags() & py::array::c_style))
    throw std::invalid_argument("X must be a C-contiguous 2-D array");
  if (labels.ndim() != 1 || labels.shape(0) != X.shape(0))
    throw std::invalid_argument("labels must be 1-D with one entry per row of X");
  if (k < 1) throw std::invalid_argument("k must be >= 1");
  if (X.dtype().is(py::dtype::of<float>()))
    return float64_sums ? centroid_sums_typed<float, double>(X, labels.data(), k)
                        : centroid_sums_typed<float>(X, labels.data(), k);
  if (X.dtype().is(py::dtype::of<double>())) return centroid_sums_typed<double>(X, labels.data(), k);
  throw py::type_error("X must be float32 or float64");
}

// subtract_centres(R, C, labels) -> Σ‖R[i] − C[labels[i]]‖²: R[i] −= C[labels[i]] in place (R's dtype),
// the squares summed in double, rows in order (the same total for any thread count). RQ-KMeans's step
// from one level's residuals to the next.
template <class T>
static double subtract_centres_typed(py::array& R_, const py::array& C_, const int64_t* lab) {
  const ptrdiff_t n = R_.shape(0), d = R_.shape(1), k = C_.shape(0);
  for (ptrdiff_t i = 0; i < n; ++i)
    if (lab[i] < 0 || lab[i] >= k) throw std::invalid_argument("labels must lie in [0, len(C))");
  T* R = static_cast<T*>(R_.mutable_data());
  const T* C = static_cast<const T*>(C_.data());
  std::vector<double> sq((size_t)n);
  auto fn = ElkanFns<T>::subtract(cpu_isa());
  {
    py::gil_scoped_release nogil;
    const int nt = region_threads((double)n * (double)d);
    if (nt == 1) {
      fn(R, C, lab, d, 0, n, sq.data());
    } else {
#pragma omp parallel num_threads(nt)
      {
        const ptrdiff_t t = omp_get_thread_num(), m = omp_get_num_threads();
        fn(R, C, lab, d, n * t / m, n * (t + 1) / m, sq.data());
      }
    }
  }
  double total = 0.0;
  for (ptrdiff_t i = 0; i < n; ++i) total += sq[(size_t)i];
  return total;
}

static double subtract_centres(py::array R, const py::array& C, const py::array_t<int64_t, py::array::c_style>& labels) {
  if (R.ndim() != 2 || !(R.flags() & py::array::c_style) || !R.writeable())
    throw std::invalid_argument("R must be a writable C-contiguous 2-D array");
  if (C.ndim() != 2 || !(C.flags() & py::array::c_style) || C.shape(1) != R.shape(1) || !C.dtype().is(R.dtype()))
    throw std::invalid_argument("C must be a C-contiguous (k, d) array of R's dtype and d");
  if (labels.ndim() != 1 || labels.shape(0) != R.shape(0))
    throw std::invalid_argument("labels must be 1-D with one entry per row of R");
  if (R.dtype().is(py::dtype::of<float>())) return subtract_centres_typed<float>(R, C, labels.data());
  if (R.dtype().is(py::dtype::of<double>())) return subtract_centres_typed<double>(R, C, labels.data());
  throw py::type_error("R must be float32 or float64");
}

// gather_rows(X, rows) -> X[rows] (parallel row copies; torch's index_select on the CPU took longer
// than the GEMM it feeds). sq_dist_to(X, v) -> ‖x_i − v‖² accumulated in double.
template <class T>
static py::array gather_typed(const py::array& X_, const int64_t* rows, ptrdiff_t b, py::array out) {
  const ptrdiff_t d = X_.shape(1);
  const T* X = static_cast<const T*>(X_.data());
  T* o = static_cast<T*>(out.mutable_data());
  py::gil_scoped_release nogil;
#pragma omp parallel for schedule(static) num_threads(region_threads((double)b * (double)d))
  for (ptrdiff_t r = 0; r < b; ++r) std::memcpy(o + r * d, X + rows[r] * d, sizeof(T) * (size_t)d);
  return out;
}

// out: None (a new array) or a C-contiguous (b, d) array of X's dtype to fill (a reused buffer
// skips the page faults of fresh memory).
static py::array gather_rows(const py::array& X, const py::array_t<int64_t, py::array::c_style>& rows,
                             py::object out_obj) {
  check2(X, "X");
  if (rows.ndim() != 1) throw std::invalid_argument("rows must be 1-D int64");
  const int64_t* r = rows.data();
  const ptrdiff_t b = rows.shape(0);
  for (ptrdiff_t i = 0; i < b; ++i)
    if (r[i] < 0 || r[i] >= X.shape(0)) throw std::invalid_argument("rows must lie in [0, n)");
  py::array out = out_obj.is_none() ? py::array(X.dtype(), std::vector<ptrdiff_t>{b, X.shape(1)})
                                    : py::array::ensure(out_obj);
  if (!out || out.ndim() != 2 || out.shape(0) != b || out.shape(1) != X.shape(1) || !out.dtype().is(X.dtype()) ||
      !(out.flags() & py::array::c_style) || !out.writeable())
    throw std::invalid_argument("out must be a writable C-contiguous (len(rows), d) array of X's dtype");
  if (X.dtype().is(py::dtype::of<float>())) return gather_typed<float>(X, r, b, out);
  if (X.dtype().is(py::dtype::of<double>())) return gather_typed<double>(X, r, b, out);
  throw py::type_error("X must be float32 or float64");
}

template <class T>
static py::array_t<double> sq_dist_to_typed(const py::array& X_, const double* V, ptrdiff_t m, bool one) {
  const ptrdiff_t n = X_.shape(0), d = X_.shape(1);
  const T* X = static_cast<const T*>(X_.data());
  py::array_t<double> out = one ? py::array_t<double>(n) : py::array_t<double>({n, m});
  double* o = out.mutable_data();
  py::gil_scoped_release nogil;
#pragma omp parallel for schedule(static) num_threads(region_threads((double)n * (double)d * (double)m))
  for (ptrdiff_t i = 0; i < n; ++i) {
    const T* x = X + i * d;
    for (ptrdiff_t v = 0; v < m; ++v) {   // the row is read from memory once, then from L1
      const double* c = V + v * d;
      double acc = 0.0;
#pragma omp simd reduction(+ : acc)
      for (ptrdiff_t t = 0; t < d; ++t) {
        const double w = (double)x[t] - c[t];
        acc += w * w;
      }
      o[i * m + v] = acc;
    }
  }
  return out;
}

// v: (d,) -> (n,), or a few vectors (m, d) -> (n, m) in one pass over X
static py::array_t<double> sq_dist_to(const py::array& X, const py::array_t<double, py::array::c_style | py::array::forcecast>& v) {
  check2(X, "X");
  if (!((v.ndim() == 1 && v.shape(0) == X.shape(1)) || (v.ndim() == 2 && v.shape(1) == X.shape(1))))
    throw std::invalid_argument("v must be (d,) or (m, d) float64, d = X.shape[1]");
  const bool one = v.ndim() == 1;
  const ptrdiff_t m = one ? 1 : v.shape(0);
  if (X.dtype().is(py::dtype::of<float>())) return sq_dist_to_typed<float>(X, v.data(), m, one);
  if (X.dtype().is(py::dtype::of<double>())) return sq_dist_to_typed<double>(X, v.data(), m, one);
  throw py::type_error("X must be float32 or float64");
}

// move_stats: the bounded loop's incremental cluster statistics. For every r with old[r] != new[r]
// (row i = rows[r], or r itself when rows is None): S[new] += x_i, S[old] −= x_i (float64, in place),
// Q[new] += q_i, Q[old] −= q_i, cnt likewise; returns how many rows moved. Float64 sums of float32
// rows are exact, so the order is free: each thread sums a contiguous share of the moved rows into a
// private (k, d) block, and the blocks are added to S. (torch's index_add_ took as long as the GEMM in a
// profile of the benchmark fit.)
template <class T>
static int64_t move_stats_typed(const py::array& X_, const int64_t* rows, const int64_t* old, const int64_t* nw,
                                ptrdiff_t b, ptrdiff_t k, const double* q, double* S, double* Q, int64_t* cnt) {
  const ptrdiff_t d = X_.shape(1);
  const T* X = static_cast<const T*>(X_.data());
  std::vector<int64_t> moved;
  for (ptrdiff_t r = 0; r < b; ++r) {
    if (old[r] < 0 || old[r] >= k || nw[r] < 0 || nw[r] >= k) throw std::invalid_argument("labels must lie in [0, k)");
    if (old[r] != nw[r]) moved.push_back(r);
  }
  const ptrdiff_t nm = (ptrdiff_t)moved.size();
  if (nm == 0) return 0;
  // Most rows of a full pass moved: summing every row once afresh reads less than adding and
  // subtracting the moved ones.
  const bool rebuild = rows == nullptr && 2 * nm > b;
  py::gil_scoped_release nogil;
  const ptrdiff_t cnt_rows = rebuild ? b : nm;
  const int nt = region_threads((double)cnt_rows * (double)d * (rebuild ? 1.0 : 2.0));
  std::vector<double> part((size_t)nt * (size_t)(k * d), 0.0);
#pragma omp parallel num_threads(nt)
  {
    const ptrdiff_t t = omp_get_thread_num();
    double* P = part.data() + (size_t)t * (size_t)(k * d);
#pragma omp for schedule(static)
    for (ptrdiff_t m = 0; m < cnt_rows; ++m) {
      const ptrdiff_t r = rebuild ? m : moved[(size_t)m], i = rows ? (ptrdiff_t)rows[r] : r;
      const T* x = X + i * d;
      double* sa = P + nw[r] * d;
      if (rebuild) {
#pragma omp simd
        for (ptrdiff_t j = 0; j < d; ++j) sa[j] += (double)x[j];
        continue;
      }
      double* so = P + old[r] * d;
#pragma omp simd
      for (ptrdiff_t j = 0; j < d; ++j) {
        sa[j] += (double)x[j];
        so[j] -= (double)x[j];
      }
    }
#pragma omp for schedule(static)
    for (ptrdiff_t e = 0; e < k * d; ++e) {
      double acc = rebuild ? 0.0 : S[e];
      for (int u = 0; u < nt; ++u) acc += part[(size_t)u * (size_t)(k * d) + (size_t)e];
      S[e] = acc;
    }
  }
  if (rebuild) {
    std::fill(Q, Q + k, 0.0);
    std::fill(cnt, cnt + k, (int64_t)0);
    for (ptrdiff_t i = 0; i < b; ++i) {
      Q[nw[i]] += q[i];
      cnt[nw[i]] += 1;
    }
    return nm;
  }
  for (ptrdiff_t m = 0; m < nm; ++m) {
    const ptrdiff_t r = moved[(size_t)m], i = rows ? (ptrdiff_t)rows[r] : r;
    Q[nw[r]] += q[i];
    Q[old[r]] -= q[i];
    cnt[nw[r]] += 1;
    cnt[old[r]] -= 1;
  }
  return nm;
}

static int64_t move_stats(const py::array& X, py::object rows_obj, const py::array_t<int64_t, py::array::c_style>& old,
                          const py::array_t<int64_t, py::array::c_style>& nw, const py::array_t<double, py::array::c_style>& q,
                          py::handle S_, py::handle Q_, py::handle cnt_) {
  check2(X, "X");
  auto S = exact_dtype<double>(S_, "S");
  auto Q = exact_dtype<double>(Q_, "Q");
  auto cnt = exact_dtype<int64_t>(cnt_, "cnt");
  const ptrdiff_t n = X.shape(0), d = X.shape(1);
  if (old.ndim() != 1 || nw.ndim() != 1 || old.shape(0) != nw.shape(0))
    throw std::invalid_argument("old and new must be 1-D int64 arrays of one length");
  const ptrdiff_t b = old.shape(0);
  py::array_t<int64_t> rows;
  const int64_t* rp = optional_rows(rows_obj, b, n, rows);
  if (!rp && b != n) {
    throw std::invalid_argument("without rows, old and new must have one entry per row of X");
  }
  if (q.ndim() != 1 || q.shape(0) != n) throw std::invalid_argument("q must be (n,) float64");
  // S, Q and cnt are updated in place: exact dtypes, contiguous, writable (a converted copy would lose the update)
  if (S.ndim() != 2 || S.shape(1) != d || !(S.flags() & py::array::c_style) || !S.writeable())
    throw std::invalid_argument("S must be a writable C-contiguous (k, d) float64 array");
  const ptrdiff_t k = S.shape(0);
  if (Q.ndim() != 1 || Q.shape(0) != k || !(Q.flags() & py::array::c_style) || !Q.writeable() || cnt.ndim() != 1 ||
      cnt.shape(0) != k || !(cnt.flags() & py::array::c_style) || !cnt.writeable())
    throw std::invalid_argument("Q (k,) float64 and cnt (k,) int64 must be writable and contiguous");
  if (X.dtype().is(py::dtype::of<float>()))
    return move_stats_typed<float>(X, rp, old.data(), nw.data(), b, k, q.data(), S.mutable_data(), Q.mutable_data(),
                                   cnt.mutable_data());
  if (X.dtype().is(py::dtype::of<double>()))
    return move_stats_typed<double>(X, rp, old.data(), nw.data(), b, k, q.data(), S.mutable_data(), Q.mutable_data(),
                                    cnt.mutable_data());
  throw py::type_error("X must be float32 or float64");
}

// Σ (a − b)² in double (the pruning test's centre-to-candidate distances: k·t of them per step).
template <class T>
static double sq_dist_exact(const T* a, const T* b, ptrdiff_t d) {
  double acc = 0.0;
  for (ptrdiff_t t = 0; t < d; ++t) {
    const double v = (double)a[t] - (double)b[t];
    acc += v * v;
  }
  return acc;
}

// kmeanspp(S (m, d), first, U (k−1, t)) -> the k row indices greedy k-means++ picks from S: centre 0 is
// row `first`; step j draws t candidates by inverse CDF of D² (the first row whose running sum exceeds
// U[j−1, c]·ΣD², all-zero D²: row ⌊U·m⌋) and keeps the one that lowers Σ min(D², ‖s − cand‖²) most
// (first on ties). One parallel region per step; the per-thread potentials are added in thread order.
template <class T>
static py::array_t<int64_t> kmeanspp_typed(const py::array& S_, int64_t first, const double* U, ptrdiff_t K,
                                           ptrdiff_t nc) {
  const ptrdiff_t m = S_.shape(0), d = S_.shape(1);
  const T* S = static_cast<const T*>(S_.data());
  py::array_t<int64_t> out(K);
  int64_t* idx = out.mutable_data();
  auto fn = ElkanFns<T>::pp(cpu_isa());
  std::vector<T> d2((size_t)m, std::numeric_limits<T>::infinity()), D((size_t)(m * nc));
  std::vector<double> cum((size_t)m);
  // One parallel region per step. Each region ends in a barrier, and on a machine shared with other
  // jobs a barrier every millisecond or so waits for a preempted thread's next time slice: at k = 96
  // on 2 cores, two threads are faster than one on an idle machine and slower beside one other busy
  // process (docs/KERNELS.md, the matrix-engine goals). So from ~64M element operations a step
  // (about 10 ms on one core) the steps always run on every thread; from ~4M they start on every
  // thread and go on on one after the second step that took over three times the fastest one so far
  // (a barrier that waited on a preempted thread); below that, on one thread. The thread count changes only the order in
  // which a potential's per-thread parts are added; the picks equal the float64 reference's with one
  // thread or more (tested).
  const double step_ops = (double)m * (double)nc * (double)d;
  const int nt_max = step_ops >= (double)(1 << 22) ? omp_get_max_threads() : 1;
  const bool adaptive = step_ops < (double)(1 << 26);
  int nt = nt_max, stalls = 0;
  double fastest = std::numeric_limits<double>::infinity();
  std::vector<double> pots((size_t)(nt_max * nc));
  std::vector<int64_t> cand((size_t)nc);
  // Exact pruning (the triangle inequality, as in accelerated k-means++): with a the chosen centre
  // that gave row i its d2, ‖s_i − s_c‖ ≥ ‖s_a − s_c‖ − ‖s_i − s_a‖, so a candidate c with
  // ‖s_a − s_c‖ ≥ 2√d2[i] (widened for the rounding of both computed distances) cannot lower d2[i] and
  // its distance is not computed: D[i, c] = d2[i], what min(d2[i], distance) gives. The pairs still
  // needed in a partly settled tile are summed one by one (pp_rows), so a potential may differ from an
  // all-tile pass in its last bits; the picks equal the float64 reference's (tested).
  std::vector<int32_t> near((size_t)m, 0);
  std::vector<unsigned char> need((size_t)(m * nc));
  std::vector<double> ecc((size_t)(K * nc));   // ‖s_idx[a] − s_cand[c]‖, a < j, per candidate c
  const double gam = 4.0 * (double)(d + 4) * (double)std::numeric_limits<T>::epsilon();
  const double widen = 2.0 * (1.0 + gam) * (1.0 + gam) * (1.0 + 1e-12);
  py::gil_scoped_release nogil;
  idx[0] = first;
  for (ptrdiff_t j = 0; j < K; ++j) {
    ptrdiff_t ncj = nc;
    if (j == 0) {
      cand[0] = first;
      ncj = 1;
    } else {
      double acc = 0.0;
      for (ptrdiff_t i = 0; i < m; ++i) cum[(size_t)i] = acc += (double)d2[(size_t)i];
      for (ptrdiff_t c = 0; c < nc; ++c) {
        const double u = U[(j - 1) * nc + c];
        ptrdiff_t r = acc > 0.0 ? std::upper_bound(cum.begin(), cum.end(), u * acc) - cum.begin() : (ptrdiff_t)(u * m);
        cand[(size_t)c] = std::min<ptrdiff_t>(std::max<ptrdiff_t>(r, 0), m - 1);
      }
    }
    std::fill(pots.begin(), pots.end(), 0.0);
    const unsigned char* nd = nullptr;
    if (j > 0) {
      for (ptrdiff_t c = 0; c < ncj; ++c)
        for (ptrdiff_t a = 0; a < j; ++a)
          ecc[(size_t)(c * K + a)] =
              std::sqrt(sq_dist_exact(S + idx[a] * d, S + cand[(size_t)c] * d, d)) * (1.0 - 1e-12);
      for (ptrdiff_t i = 0; i < m; ++i) {
        const double r = widen * std::sqrt((double)d2[(size_t)i]) + 1e-300;
        const double* e = ecc.data() + near[(size_t)i];
        for (ptrdiff_t c = 0; c < ncj; ++c) need[(size_t)(i * ncj + c)] = !(e[c * K] >= r);
      }
      nd = need.data();
    }
    const int used = nt;   // this step's threads (nt may drop to 1 for the next steps)
    if (used == 1) {
      fn(S, d, cand.data(), ncj, d2.data(), D.data(), pots.data(), 0, m, nd);
    } else {
      const double t0 = omp_get_wtime();
#pragma omp parallel num_threads(used)
      {
        const ptrdiff_t t = omp_get_thread_num(), lo = m * t / used, hi = m * (t + 1) / used;
        fn(S, d, cand.data(), ncj, d2.data(), D.data(), pots.data() + t * nc, lo, hi, nd);
      }
      const double dt = omp_get_wtime() - t0;
      if (adaptive && j > 0) {
        if (dt > 3.0 * fastest && ++stalls >= 2) nt = 1;
        fastest = std::min(fastest, dt);
      }
    }
    ptrdiff_t best = 0;
    double bp = std::numeric_limits<double>::infinity();
    for (ptrdiff_t c = 0; c < ncj; ++c) {
      double p = 0.0;
      for (int t = 0; t < used; ++t) p += pots[(size_t)(t * nc + c)];
      if (p < bp) { bp = p; best = c; }
    }
    idx[j] = cand[(size_t)best];
    for (ptrdiff_t i = 0; i < m; ++i) {
      const T v = D[(size_t)(i * ncj + best)];
      if (v < d2[(size_t)i]) near[(size_t)i] = (int32_t)j;
      d2[(size_t)i] = v;
    }
  }
  return out;
}

static py::array_t<int64_t> kmeanspp(const py::array& S, int64_t first,
                                     const py::array_t<double, py::array::c_style | py::array::forcecast>& U) {
  check2(S, "S");
  if (S.shape(0) < 1) throw std::invalid_argument("S must have at least one row");
  if (first < 0 || first >= S.shape(0)) throw std::invalid_argument("first must index a row of S");
  if (U.ndim() != 2 || U.shape(1) < 1) throw std::invalid_argument("U must be (k - 1, candidates) with candidates >= 1");
  for (ptrdiff_t i = 0; i < U.size(); ++i)
    if (!(U.data()[i] >= 0.0 && U.data()[i] < 1.0)) throw std::invalid_argument("U must hold draws in [0, 1)");
  if (S.dtype().is(py::dtype::of<float>())) return kmeanspp_typed<float>(S, first, U.data(), U.shape(0) + 1, U.shape(1));
  if (S.dtype().is(py::dtype::of<double>())) return kmeanspp_typed<double>(S, first, U.data(), U.shape(0) + 1, U.shape(1));
  throw py::type_error("S must be float32 or float64");
}

}  // namespace

void register_kmeans(py::module_& m) {
  m.def("kmeanspp", &kmeanspp, py::arg("S"), py::arg("first"), py::arg("U"),
        "Greedy k-means++ on the rows of S: the k = len(U) + 1 chosen row indices, from the first row and the "
        "uniform draws U (k - 1, candidates).");
  m.def("centroid_sums", &centroid_sums, py::arg("X"), py::arg("labels"), py::arg("k"),
        py::arg("float64_sums") = false,
        "Per-cluster sums (k, d) and counts (k,) of the rows of X, in parallel (sums in X's dtype or float64).");
  m.def("subtract_centres", &subtract_centres, py::arg("R"), py::arg("C"), py::arg("labels"),
        "R[i] -= C[labels[i]] in place; returns the sum of the new rows' squared norms (float64 accumulation).");
  m.def("gather_rows", &gather_rows, py::arg("X"), py::arg("rows"), py::arg("out") = py::none(),
        "X[rows] (parallel row copies), into `out` when given.");
  m.def("move_stats", &move_stats, py::arg("X"), py::arg("rows"), py::arg("old"), py::arg("new"), py::arg("q"),
        py::arg("S"), py::arg("Q"), py::arg("cnt"),
        "Move the rows whose label changed from old to new in the float64 cluster sums S, Q and counts (in place); "
        "returns how many moved.");
  m.def("sq_dist_to", &sq_dist_to, py::arg("X"), py::arg("v"), "‖x_i − v‖² per row, accumulated in float64; v (m, d) gives (n, m) in one pass over X.");
  m.def("elkan_filter", &elkan_filter, py::arg("X"), py::arg("C"), py::arg("state"), py::arg("disp"), py::arg("now"),
        "Test Elkan bounds against the centres' displacements since each epoch; return the rows to re-evaluate.");
  m.def("elkan_refresh", &elkan_refresh, py::arg("G"), py::arg("X"), py::arg("C"), py::arg("xn2"), py::arg("rows"),
        py::arg("row0"), py::arg("state"), py::arg("now"), py::arg("gamma"), py::arg("cmax"), py::arg("eb") = 0.0,
        py::arg("cnorm") = 0.0,
        "Labels, exact upper and fresh lower bounds of the rows evaluated in G = ‖c‖² − 2x·c (in place).");
  m.def("kmeans_epilogue", &kmeans_epilogue, py::arg("G"), py::arg("X"), py::arg("C"), py::arg("labels"),
        py::arg("d2"), py::arg("xn") = py::none(), "Row argmin of G = ‖c‖² − 2x·c (first on ties) and the exact squared distance, in place.");
}

}  // namespace contextrag
