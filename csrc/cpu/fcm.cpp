// FCM helpers that torch's CPU ops do with extra passes.
//
// fcm_epilogue: argument checks and ISA dispatch for the FCM rows (fcm_rows.h, compiled per
// instruction set in cluster_rows_{avx512,avx2,generic}.cpp).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "isa.h"

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

namespace py = pybind11;

namespace contextrag {
// fcm_rows.h, compiled per instruction set (cluster_rows_{avx512,avx2,generic}.cpp)
#define CR_DECLARE_FCM(ns)                                                                             \
  namespace ns {                                                                                      \
  double fcm_rows_f32(const float*, const float*, const float*, const float*, ptrdiff_t, ptrdiff_t,   \
                      ptrdiff_t, double, float, float*, float*, unsigned short*, ptrdiff_t, ptrdiff_t, \
                      const float*, float*);                                                          \
  double fcm_rows_f64(const double*, const double*, const double*, const double*, ptrdiff_t,          \
                      ptrdiff_t, ptrdiff_t, double, double, double*, double*, unsigned short*,        \
                      ptrdiff_t, ptrdiff_t, const double*, double*);                                  \
  }
CR_DECLARE_FCM(generic)
#if defined(__x86_64__) || defined(__i386__)
CR_DECLARE_FCM(avx2)
CR_DECLARE_FCM(avx512)
#endif
#undef CR_DECLARE_FCM

namespace {

static void check2(const py::array& a, const char* name) {
  if (a.ndim() != 2 || !(a.flags() & py::array::c_style))
    throw std::invalid_argument(std::string(name) + " must be a C-contiguous 2-D array");
}

// fcm_epilogue(G (b,c), X (b,d), C (c,d), xn (b,), m, U_out (b,c), W=None, U_prev=None, J=None,
// slack=0, Wt=None, row0=0): memberships into U (fcm_rows.h, compiled per ISA, picked by cpu_isa());
// optionally W = U^m (the next centre update's weights) or its transposed bf16 copy written into
// columns row0.. of Wt (c, ldwt) uint16, the row objectives J, and, with U_prev, the returned
// max |U − U_prev| (the stopping test), so fcm_fit makes no extra pass over U.
static double fcm_epilogue(const py::array& G, const py::array& X, const py::array& C, const py::array& xn,
                           double m, py::array U, py::object W_obj, py::object Uprev_obj, py::object J_obj,
                           double slack, py::object Wt_obj, int64_t row0) {
  check2(G, "G"); check2(X, "X"); check2(C, "C"); check2(U, "U");
  const ptrdiff_t b = G.shape(0), c = G.shape(1), d = X.shape(1);
  if (X.shape(0) != b || C.shape(0) != c || C.shape(1) != d || c < 1 || U.shape(0) != b || U.shape(1) != c ||
      xn.ndim() != 1 || xn.shape(0) != b || !(xn.flags() & py::array::c_style))
    throw std::invalid_argument("shapes must be G (b, c), X (b, d), C (c, d), xn (b,), U (b, c)");
  if (!(m > 1.0)) throw std::invalid_argument("m must be > 1");
  for (const py::array* a : {&X, &C, &xn, static_cast<const py::array*>(&U)})
    if (!G.dtype().is(a->dtype())) throw py::type_error("G, X, C, xn and U must share one dtype");
  auto opt = [&](py::object o, const char* name, ptrdiff_t nd, ptrdiff_t cols) -> py::array {
    if (o.is_none()) return py::array();
    py::array a = py::array::ensure(o);
    if (!a || a.ndim() != nd || a.shape(0) != b || (nd == 2 && a.shape(1) != cols) || !a.dtype().is(U.dtype()) ||
        !(a.flags() & py::array::c_style) || !a.writeable())
      throw std::invalid_argument(std::string(name) + " must be a writable C-contiguous array shaped and typed like " +
                                  (nd == 2 ? "U" : "xn"));
    return a;
  };
  py::array W = opt(W_obj, "W", 2, c), Up = opt(Uprev_obj, "U_prev", 2, c), J = opt(J_obj, "J", 1, 0);
  unsigned short* wt = nullptr;
  ptrdiff_t ldwt = 0;
  if (!Wt_obj.is_none()) {
    py::array Wt = py::array::ensure(Wt_obj);
    if (!Wt || Wt.ndim() != 2 || Wt.shape(0) != c || !Wt.dtype().is(py::dtype::of<uint16_t>()) ||
        !(Wt.flags() & py::array::c_style) || row0 < 0 || row0 + b > Wt.shape(1))
      throw std::invalid_argument("Wt must be a C-contiguous (c, >= row0 + b) uint16 array");
    wt = static_cast<unsigned short*>(Wt.mutable_data());
    ldwt = Wt.shape(1);
  }
  const bool hw = !W_obj.is_none(), hp = !Uprev_obj.is_none(), hj = !J_obj.is_none();
  const Isa isa = cpu_isa();
  if (G.dtype().is(py::dtype::of<float>())) {
    const float s = slack > 0 ? (float)slack : 64.0f * (float)(d + 4) * std::numeric_limits<float>::epsilon();
    auto f = CR_PICK_ISA(isa, fcm_rows_f32);
    const float *g = static_cast<const float*>(G.data()), *x = static_cast<const float*>(X.data()),
                *cc = static_cast<const float*>(C.data()), *xv = static_cast<const float*>(xn.data()),
                *up = hp ? static_cast<const float*>(Up.data()) : nullptr;
    float *u = static_cast<float*>(U.mutable_data()), *w = hw ? static_cast<float*>(W.mutable_data()) : nullptr,
          *j = hj ? static_cast<float*>(J.mutable_data()) : nullptr;
    py::gil_scoped_release nogil;
    return f(g, x, cc, xv, b, c, d, m, s, u, w, wt, ldwt, row0, up, j);
  }
  if (G.dtype().is(py::dtype::of<double>())) {
    const double s = slack > 0 ? slack : 64.0 * (double)(d + 4) * std::numeric_limits<double>::epsilon();
    auto f = CR_PICK_ISA(isa, fcm_rows_f64);
    const double *g = static_cast<const double*>(G.data()), *x = static_cast<const double*>(X.data()),
                 *cc = static_cast<const double*>(C.data()), *xv = static_cast<const double*>(xn.data()),
                 *up = hp ? static_cast<const double*>(Up.data()) : nullptr;
    double *u = static_cast<double*>(U.mutable_data()), *w = hw ? static_cast<double*>(W.mutable_data()) : nullptr,
           *j = hj ? static_cast<double*>(J.mutable_data()) : nullptr;
    py::gil_scoped_release nogil;
    return f(g, x, cc, xv, b, c, d, m, s, u, w, wt, ldwt, row0, up, j);
  }
  throw py::type_error("G must be float32 or float64");
}

}  // namespace

void register_fcm(py::module_& m) {
  m.def("fcm_epilogue", &fcm_epilogue, py::arg("G"), py::arg("X"), py::arg("C"), py::arg("xn"), py::arg("m"),
        py::arg("U"), py::arg("W") = py::none(), py::arg("U_prev") = py::none(), py::arg("J") = py::none(),
        py::arg("slack") = 0.0, py::arg("Wt") = py::none(), py::arg("row0") = 0,
        "FCM memberships from G = ‖c‖² − 2x·c and ‖x‖² into U (one-hot on a centre); optionally W = U^m, its "
        "transposed bf16 copy into Wt[:, row0:row0+b], per-row objectives J = Σ u^m d²; returns max |U − U_prev| "
        "(0 without U_prev). Distances below slack·(‖x‖² + max‖c‖²) (default 64·(d+4)·eps) are recomputed exactly.");
}

}  // namespace contextrag
