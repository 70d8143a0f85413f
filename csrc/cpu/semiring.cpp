// Dense semiring products (luk_up / luk_down / fuzzy_route / meet_cardinality): Python entry point,
// run-time ISA dispatch and the scalar epilogues.
//
// Every op is out[s, m] = R_g op(Bc[s, g], V[g, m]) with Bc (S, G) and V (G, M), both C-contiguous
// and of one dtype; the Python side lays the operands out (luk_down passes Iᵀ, fuzzy_route Iᵀ,
// meet_cardinality Bᵀ). Epilogues follow the reference's association exactly:
//   "luk"   : min(1, 1 + min_g (V − Bc))        a zero in Bc gives V − 0 ≥ 0, i.e. a term ≥ 1: skippable
//   "route" : max(0, max_g (Bc + V) − 1)        a zero in Bc gives V − 1 ≤ 0 after the clamp: skippable
//   "meet"  : Σ_g min(Bc, V)                    a zero in Bc adds exactly +0: skippable
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "isa.h"
#include "plain_array.h"

namespace py = pybind11;

namespace contextrag {

// ---- ISA selection -----------------------------------------------------------------------------
bool isa_supported(Isa isa) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();  // libgcc also checks that the OS saves the wider registers (XCR0)
  if (isa == Isa::avx512) return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2");
  if (isa == Isa::avx2) return __builtin_cpu_supports("avx2");
#else
  if (isa != Isa::generic) return false;
#endif
  return true;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::avx512: return "avx512";
    case Isa::avx2: return "avx2";
    default: return "generic";
  }
}

static Isa best_isa() {
  if (isa_supported(Isa::avx512)) return Isa::avx512;
  if (isa_supported(Isa::avx2)) return Isa::avx2;
  return Isa::generic;
}

// "amx" is the AVX-512 dispatch with the AMX tile GEMMs on (gemm_amx.cpp); "avx512" names it without
// them, so CONTEXTRAG_ISA=avx512 on an AMX machine runs what an AVX-512 CPU without AMX runs.
static bool wants_amx(const std::string& name) { return name == "amx"; }
static Isa parse_isa(const std::string& name) {
  if (name == "avx512" || name == "amx") return Isa::avx512;
  if (name == "avx2") return Isa::avx2;
  if (name == "generic") return Isa::generic;
  if (name == "auto" || name.empty()) return best_isa();
  throw std::invalid_argument("isa must be one of 'amx', 'avx512', 'avx2', 'generic', 'auto', got '" + name + "'");
}

// CONTEXTRAG_ISA (or its older name CONTEXTRAG_CPU_ISA) forces the dispatch. A value that is unknown
// or that this CPU cannot run must not take the module down at load time: it is kept in g_isa_error
// and the Python side raises it as a ValueError on first use (ops/_backend.py).
static std::string g_isa_error;
static int g_amx = -1;   // the AMX tiles: -1 where the CPU and OS allow them (auto), 0 off, 1 forced on
static bool name_supported(const std::string& name) {
  return isa_supported(parse_isa(name)) && (!wants_amx(name) || amx_supported());
}

static Isa g_isa = [] {
  for (const char* var : {"CONTEXTRAG_ISA", "CONTEXTRAG_CPU_ISA"}) {
    const char* env = std::getenv(var);
    if (!env || !*env) continue;
    try {
      Isa want = parse_isa(env);
      if (name_supported(env)) {
        const std::string name(env);
        g_amx = wants_amx(name) ? 1 : (name == "auto" ? -1 : 0);
        return want;
      }
      g_isa_error = std::string(var) + "=" + env + ": this CPU does not support " + env +
                    " (supported: " + (amx_supported() ? "amx, " : "") +
                    (isa_supported(Isa::avx512) ? "avx512, " : "") +
                    (isa_supported(Isa::avx2) ? "avx2, " : "") + "generic)";
    } catch (const std::exception& e) {
      g_isa_error = std::string(var) + ": " + e.what();
    }
    break;
  }
  return best_isa();
}();

const std::string& isa_env_error() { return g_isa_error; }

Isa cpu_isa() { return g_isa; }

bool amx_allowed() { return g_isa == Isa::avx512 && g_amx != 0; }

void set_cpu_isa(const std::string& name) {
  Isa want = parse_isa(name);
  if (!name_supported(name))
    throw std::invalid_argument(std::string("isa '") + name + "' is not supported by this CPU");
  g_isa = want;
  g_amx = wants_amx(name) ? 1 : (name == "auto" || name.empty() ? -1 : 0);
}

// ---- dispatch ----------------------------------------------------------------------------------
template <class T>
static void semiring_dispatch(SemiringMode op, const T* Bc, const T* V, T* out, ptrdiff_t S, ptrdiff_t G, ptrdiff_t M,
                              int skip) {
  constexpr bool f32 = std::is_same<T, float>::value;
  switch (g_isa) {
#if defined(__x86_64__) || defined(__i386__)
    case Isa::avx512:
      if constexpr (f32) avx512::semiring_f32(op, Bc, V, out, S, G, M, skip);
      else avx512::semiring_f64(op, Bc, V, out, S, G, M, skip);
      return;
    case Isa::avx2:
      if constexpr (f32) avx2::semiring_f32(op, Bc, V, out, S, G, M, skip);
      else avx2::semiring_f64(op, Bc, V, out, S, G, M, skip);
      return;
#endif
    default:
      if constexpr (f32) generic::semiring_f32(op, Bc, V, out, S, G, M, skip);
      else generic::semiring_f64(op, Bc, V, out, S, G, M, skip);
  }
}

static void check_matrix(const py::array& a, const char* name) {
  if (a.ndim() != 2)
    throw std::invalid_argument(std::string(name) + " must be 2-D, got " + std::to_string(a.ndim()) + "-D");
  if (!(a.flags() & py::array::c_style))
    throw std::invalid_argument(std::string(name) + " must be C-contiguous");
}

template <class T>
static py::array_t<T> semiring_typed(SemiringMode op, const py::array& Bc_, const py::array& V_, bool skip) {
  const ptrdiff_t S = Bc_.shape(0), G = Bc_.shape(1), M = V_.shape(1);
  py::array_t<T> out({S, M});
  const T* Bc = static_cast<const T*>(Bc_.data());
  const T* V = static_cast<const T*>(V_.data());
  T* o = out.mutable_data();
  {
    py::gil_scoped_release nogil;
    const T init = op == SemiringMode::min_plus   ? std::numeric_limits<T>::infinity()
                 : op == SemiringMode::max_plus ? -std::numeric_limits<T>::infinity() : T(0);
    const ptrdiff_t n = S * M;
    for (ptrdiff_t i = 0; i < n; ++i) o[i] = init;
    semiring_dispatch<T>(op, Bc, V, o, S, G, M, skip ? 1 : 0);
    if (op == SemiringMode::min_plus) {
      for (ptrdiff_t i = 0; i < n; ++i) { T t = T(1) + o[i]; o[i] = t < T(1) ? t : T(1); }
    } else if (op == SemiringMode::max_plus) {
      for (ptrdiff_t i = 0; i < n; ++i) { T t = o[i] - T(1); o[i] = t > T(0) ? t : T(0); }
    }
  }
  return out;
}

// Python: semiring(op, Bc, V, skip_zeros=True) with op in {"luk", "route", "meet"}.
static py::array semiring(const std::string& opname, const py::array& Bc, const py::array& V, bool skip) {
  SemiringMode op;
  if (opname == "luk") op = SemiringMode::min_plus;
  else if (opname == "route") op = SemiringMode::max_plus;
  else if (opname == "meet") op = SemiringMode::min_sum;
  else throw std::invalid_argument("op must be 'luk', 'route' or 'meet', got '" + opname + "'");
  check_matrix(Bc, "Bc");
  check_matrix(V, "V");
  if (Bc.shape(1) != V.shape(0))
    throw std::invalid_argument("Bc is (S, G) and V is (G, M): got G=" + std::to_string(Bc.shape(1)) +
                                " and " + std::to_string(V.shape(0)));
  if (!Bc.dtype().is(V.dtype())) throw py::type_error("Bc and V must have the same dtype");
  if (Bc.dtype().is(py::dtype::of<float>())) return semiring_typed<float>(op, Bc, V, skip);
  if (Bc.dtype().is(py::dtype::of<double>())) return semiring_typed<double>(op, Bc, V, skip);
  throw py::type_error("Bc and V must be float32 or float64");
}

// meet_rows(A (P, G), B (Q, G)) -> (P, Q), out[i, j] = Σ_g min(A[i, g], B[j, g]) with both operands
// as given (row-major, g along the rows): the dense meet_cardinality needs no transpose of B.
template <class T>
static py::array_t<T> meet_rows_typed(const py::array& A_, const py::array& B_) {
  const ptrdiff_t P = A_.shape(0), Q = B_.shape(0), G = A_.shape(1);
  py::array_t<T> out({P, Q});
  T* o = out.mutable_data();
  const T* A = static_cast<const T*>(A_.data());
  const T* B = static_cast<const T*>(B_.data());
  constexpr bool f32 = std::is_same<T, float>::value;
  py::gil_scoped_release nogil;
  std::fill(o, o + P * Q, T(0));
  switch (g_isa) {
#if defined(__x86_64__) || defined(__i386__)
    case Isa::avx512:
      if constexpr (f32) avx512::meet_rows_f32(A, B, o, P, Q, G); else avx512::meet_rows_f64(A, B, o, P, Q, G);
      break;
    case Isa::avx2:
      if constexpr (f32) avx2::meet_rows_f32(A, B, o, P, Q, G); else avx2::meet_rows_f64(A, B, o, P, Q, G);
      break;
#endif
    default:
      if constexpr (f32) generic::meet_rows_f32(A, B, o, P, Q, G); else generic::meet_rows_f64(A, B, o, P, Q, G);
  }
  return out;
}

static py::array meet_rows(const py::array& A, const py::array& B) {
  check_matrix(A, "A");
  check_matrix(B, "B");
  if (A.shape(1) != B.shape(1))
    throw std::invalid_argument("A and B must have the same number of columns, got " + std::to_string(A.shape(1)) +
                                " and " + std::to_string(B.shape(1)));
  if (!A.dtype().is(B.dtype())) throw py::type_error("A and B must have the same dtype");
  if (A.dtype().is(py::dtype::of<float>())) return meet_rows_typed<float>(A, B);
  if (A.dtype().is(py::dtype::of<double>())) return meet_rows_typed<double>(A, B);
  throw py::type_error("A and B must be float32 or float64");
}

// transpose(a) -> aᵀ, C-contiguous. Work unit: a strip of 16 source columns (one cache line per source
// row) over all rows; each of the 16 destination rows is then written front to back, so reads are
// whole lines and writes 16 sequential streams. The semiring kernels want the reduction axis g as
// rows of the second operand; torch's strided copy of a (132, 100000) matrix ran at a fifth of
// memory bandwidth.
template <class T>
static py::array_t<T> transpose_typed(const py::array& a_) {
  const ptrdiff_t r = a_.shape(0), c = a_.shape(1);
  py::array_t<T> out = plain_array<T>({c, r});
  const T* a = static_cast<const T*>(a_.data());
  T* o = out.mutable_data();
  constexpr ptrdiff_t W = 64 / sizeof(T);
  const ptrdiff_t strips = (c + W - 1) / W;
  py::gil_scoped_release nogil;
#pragma omp parallel for schedule(static)
  for (ptrdiff_t s = 0; s < strips; ++s) {
    const ptrdiff_t j0 = s * W, w = j0 + W < c ? W : c - j0;
    if (w == W) {
      for (ptrdiff_t i = 0; i < r; ++i) {
        const T* src = a + i * c + j0;
#pragma GCC unroll 16
        for (ptrdiff_t jj = 0; jj < W; ++jj) o[(j0 + jj) * r + i] = src[jj];
      }
    } else {
      for (ptrdiff_t i = 0; i < r; ++i)
        for (ptrdiff_t jj = 0; jj < w; ++jj) o[(j0 + jj) * r + i] = a[i * c + j0 + jj];
    }
  }
  return out;
}

static py::array transpose(const py::array& a) {
  check_matrix(a, "a");
  if (a.dtype().is(py::dtype::of<float>())) return transpose_typed<float>(a);
  if (a.dtype().is(py::dtype::of<double>())) return transpose_typed<double>(a);
  throw py::type_error("a must be float32 or float64");
}

// route_rows(mu (Q, V), I (n, V), idx (m,)) -> (Q, m), out[q, i] = max(0, max_v (mu[q, v] + I[idx[i], v]) − 1):
// the "route" epilogue on the rows idx of an item-major I, read where they lie (semiring_kernels.h). A
// candidate query routes a few percent of a million rows; NumPy's gather, add and reduce made three
// passes over copies. The float additions, the max and the − 1 are NumPy's, so the result is the same bits.
static_assert(sizeof(ptrdiff_t) == sizeof(int64_t), "row indices are passed as ptrdiff_t");
template <class T>
static py::array_t<T> route_rows_typed(const py::array& mu_, const py::array& I_, const int64_t* idx, ptrdiff_t m) {
  const ptrdiff_t Q = mu_.shape(0), V = mu_.shape(1);
  py::array_t<T> out({Q, m});
  T* o = out.mutable_data();
  const T* mu = static_cast<const T*>(mu_.data());
  const T* I = static_cast<const T*>(I_.data());
  const ptrdiff_t* ix = reinterpret_cast<const ptrdiff_t*>(idx);
  constexpr bool f32 = std::is_same<T, float>::value;
  py::gil_scoped_release nogil;
  if constexpr (f32) CR_PICK_ISA(g_isa, route_rows_f32)(mu, I, ix, o, Q, V, m);
  else CR_PICK_ISA(g_isa, route_rows_f64)(mu, I, ix, o, Q, V, m);
  return out;
}

static py::array route_rows(const py::array& mu, const py::array& I, const py::array_t<int64_t, py::array::c_style>& idx) {
  check_matrix(mu, "mu");
  check_matrix(I, "I");
  if (mu.shape(1) != I.shape(1))
    throw std::invalid_argument("mu and I must have the same number of columns (nodes), got " +
                                std::to_string(mu.shape(1)) + " and " + std::to_string(I.shape(1)));
  if (!mu.dtype().is(I.dtype())) throw py::type_error("mu and I must have the same dtype");
  if (idx.ndim() != 1) throw std::invalid_argument("idx must be 1-D");
  const ptrdiff_t m = idx.shape(0), n = I.shape(0);
  const int64_t* ix = idx.data();
  for (ptrdiff_t i = 0; i < m; ++i)
    if (ix[i] < 0 || ix[i] >= n)
      throw std::invalid_argument("idx must hold row indices in [0, " + std::to_string(n) + "), got " +
                                  std::to_string(ix[i]));
  if (mu.dtype().is(py::dtype::of<float>())) return route_rows_typed<float>(mu, I, ix, m);
  if (mu.dtype().is(py::dtype::of<double>())) return route_rows_typed<double>(mu, I, ix, m);
  throw py::type_error("mu and I must be float32 or float64");
}

void register_semiring(py::module_& m) {
  m.def("meet_rows", &meet_rows, py::arg("A"), py::arg("B"),
        "out[i, j] = Σ_g min(A[i, g], B[j, g]) for row-major A (P, G) and B (Q, G), no transpose.");
  m.def("transpose", &transpose, py::arg("a"), "aᵀ as a new C-contiguous array (cache-blocked, parallel).");
  m.def("route_rows", &route_rows, py::arg("mu"), py::arg("I"), py::arg("idx"),
        "out[q, i] = max(0, max_v (mu[q, v] + I[idx[i], v]) − 1) on the rows idx of an item-major I.");
  m.def("semiring", &semiring, py::arg("op"), py::arg("Bc"), py::arg("V"), py::arg("skip_zeros") = true,
        "out[s, m] = R_g op(Bc[s, g], V[g, m]) with the op's epilogue ('luk', 'route' or 'meet').");
  m.def("cpu_isa", [] { return std::string(isa_name(cpu_isa())); }, "Instruction set the CPU kernels use");
  m.def("isa_env_error", [] { return isa_env_error(); },
        "Why CONTEXTRAG_ISA could not be honoured ('' when unset or honoured)");
  m.def("set_cpu_isa", &set_cpu_isa, py::arg("isa"),
        "Force 'amx' (AVX-512 with the AMX tile GEMMs), 'avx512', 'avx2' or 'generic' (tests), or 'auto'; "
        "raises ValueError if unsupported");
  m.def("cpu_isa_supported", [](const std::string& name) { return name_supported(name); }, py::arg("isa"));
  m.def("matrix_engine", [] { return std::string(amx_active() ? "amx" : "none"); },
        "The matrix engine the bf16 GEMMs run on: 'amx' (AMX tiles) or 'none' (vector units)");
}

}  // namespace contextrag
