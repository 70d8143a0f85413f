// fp32 distance tiles of our own (the microkernel: gemm_f32_rows.h, one build per instruction set).
//
// Why not torch's GEMM: each torch CPU op runs on its intra-op thread pool and ends in a barrier;
// on a machine shared with other jobs that barrier waits for any preempted thread's next time slice,
// so a small k-means (a 2000×384 RQ level: 12M multiply-adds, under a millisecond of one core) spent
// ~30 ms per GEMM call at load 15 on 2 cores, profiled. Here a problem runs on as many threads as its
// size pays for (one per ~32M multiply-adds), small ones on the calling thread with no region at all,
// and the k-means assignment keeps its (8, k) tile in cache for the arg-min (never an n×k matrix).
//
//   f32_pack_b(C (k, d)) -> Cᵀ (d, Np) float32, Np = k rounded up to 16, zero-padded
//   gemm_f32(A (M, K), Bp (K, Np), N, out (M, N), alpha, bias): out = bias + alpha · A·B
//   kmeans_assign_f32(X (n, d), Cp, C (k, d), cn (k,) = ‖c‖², labels (n,) int64, d2 (n,), xn=None):
//     G = ‖c‖² − 2 x·c per row, first arg-min (as kmeans_epilogue after torch's addmm); d2 the exact
//     Σ(x − c)² of the chosen centre accumulated in double, or with xn (‖x‖²) the GEMM form
//     max(0, ‖x‖² + G_min) (inside Lloyd iterations: no second pass over X).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <omp.h>

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "isa.h"
#include "plain_array.h"

namespace py = pybind11;

namespace contextrag {
#define CR_DECLARE_F32(ns) \
  namespace ns {           \
  void f32_dot_block(const float*, ptrdiff_t, int, const float*, ptrdiff_t, ptrdiff_t, float*); \
  }
CR_DECLARE_F32(generic)
#if defined(__x86_64__) || defined(__i386__)
CR_DECLARE_F32(avx2)
CR_DECLARE_F32(avx512)
#endif
#undef CR_DECLARE_F32

namespace {

constexpr int BLOCK_ROWS = 8;   // rows per tile: the largest register tile (AVX-512) takes 8

typedef void (*DotFn)(const float*, ptrdiff_t, int, const float*, ptrdiff_t, ptrdiff_t, float*);

DotFn dot_fn() { return CR_PICK_ISA(cpu_isa(), f32_dot_block); }

// One thread per ~32M multiply-adds (a few ms of one core), at most all: below that a parallel
// region's start-up and barrier cost more than they save on a busy machine.
int f32_threads(double macs) {
  const int mx = omp_get_max_threads();
  const double nt = macs / (double)(1 << 25);
  return nt < 1.0 ? 1 : nt >= (double)mx ? mx : (int)nt;
}

// Runs body(block index, G buffer) over ceil(M / BLOCK_ROWS) row blocks; the calling thread alone
// (no OpenMP region) when one thread is all the work pays for.
template <class F>
void for_blocks(ptrdiff_t M, ptrdiff_t Np, int nt, F body) {
  const ptrdiff_t nb = (M + BLOCK_ROWS - 1) / BLOCK_ROWS;
  if (nt <= 1) {
    std::vector<float> G((size_t)BLOCK_ROWS * (size_t)Np);
    for (ptrdiff_t b = 0; b < nb; ++b) body(b, G.data());
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    std::vector<float> G((size_t)BLOCK_ROWS * (size_t)Np);
    // dynamic: on a busy machine a preempted thread's blocks go to the others
#pragma omp for schedule(dynamic, 16)
    for (ptrdiff_t b = 0; b < nb; ++b) body(b, G.data());
  }
}

using F32C = py::array_t<float, py::array::c_style>;

void check_pair(const F32C& A, const F32C& Bp, const std::string& a, const std::string& b) {
  if (A.ndim() != 2 || Bp.ndim() != 2) throw std::invalid_argument(a + " and " + b + " must be 2-D float32");
  if (Bp.shape(0) != A.shape(1))
    throw std::invalid_argument(b + " must have " + a + "'s number of columns as rows (f32_pack_b)");
  if (Bp.shape(1) % 16 != 0) throw std::invalid_argument(b + "'s columns must be padded to a multiple of 16 (f32_pack_b)");
}

py::array_t<float> f32_pack_b(const py::array_t<float, py::array::c_style | py::array::forcecast>& C) {
  if (C.ndim() != 2) throw std::invalid_argument("C must be 2-D float32 (k, d)");
  const ptrdiff_t k = C.shape(0), d = C.shape(1), Np = (k + 15) / 16 * 16;
  py::array_t<float> out = plain_array<float>({d, Np});
  const float* c = C.data();
  float* o = out.mutable_data();
  for (ptrdiff_t p = 0; p < d; ++p)
    for (ptrdiff_t j = 0; j < Np; ++j) o[p * Np + j] = j < k ? c[j * d + p] : 0.0f;
  return out;
}

void gemm_f32(const F32C& A, const F32C& Bp, ptrdiff_t N, F32C out, double alpha, py::object bias_obj) {
  check_pair(A, Bp, "A", "Bp");
  const ptrdiff_t M = A.shape(0), K = A.shape(1), Np = Bp.shape(1);
  if (N < 0 || N > Np || Np - N >= 16) throw std::invalid_argument("N must be the number of columns Bp was packed for");
  if (out.ndim() != 2 || out.shape(0) != M || out.shape(1) != N) throw std::invalid_argument("out must be (M, N) float32");
  py::array_t<float, py::array::c_style | py::array::forcecast> bias;
  const float* bp = nullptr;
  if (!bias_obj.is_none()) {
    bias = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(bias_obj);
    if (!bias || bias.ndim() != 1 || bias.shape(0) != N) throw std::invalid_argument("bias must be (N,) float32");
    bp = bias.data();
  }
  if (M == 0 || N == 0) return;
  const float* a = A.data();
  const float* b = Bp.data();
  float* o = out.mutable_data();
  const float al = (float)alpha;
  const DotFn dot = dot_fn();
  py::gil_scoped_release nogil;
  for_blocks(M, Np, f32_threads((double)M * (double)N * (double)K), [&](ptrdiff_t blk, float* G) {
    const ptrdiff_t r0 = blk * BLOCK_ROWS;
    const int rs = (int)(M - r0 < BLOCK_ROWS ? M - r0 : BLOCK_ROWS);
    dot(a + r0 * K, K, rs, b, Np, K, G);
    for (int r = 0; r < rs; ++r) {
      float* orow = o + (r0 + r) * N;
      const float* g = G + r * Np;
      if (bp) {
        for (ptrdiff_t j = 0; j < N; ++j) orow[j] = bp[j] + al * g[j];
      } else {
        for (ptrdiff_t j = 0; j < N; ++j) orow[j] = al * g[j];
      }
    }
  });
}

void kmeans_assign_f32(const F32C& X, const F32C& Cp, const F32C& C, const F32C& cn, py::array_t<int64_t, py::array::c_style> labels,
                       F32C d2, py::object xn_obj) {
  check_pair(X, Cp, "X", "Cp");
  const ptrdiff_t n = X.shape(0), d = X.shape(1), Np = Cp.shape(1);
  if (C.ndim() != 2 || C.shape(1) != d || C.shape(0) < 1) throw std::invalid_argument("C must be (k, d) float32 with k >= 1");
  const ptrdiff_t k = C.shape(0);
  if (Np != (k + 15) / 16 * 16) throw std::invalid_argument("Cp must be C packed by f32_pack_b");
  if (cn.ndim() != 1 || cn.shape(0) != k) throw std::invalid_argument("cn must be (k,) float32");
  if (labels.ndim() != 1 || labels.shape(0) != n || d2.ndim() != 1 || d2.shape(0) != n)
    throw std::invalid_argument("labels and d2 must be (n,)");
  F32C xn;
  const float* xp = nullptr;
  if (!xn_obj.is_none()) {
    if (!py::isinstance<F32C>(xn_obj)) throw std::invalid_argument("xn must be a contiguous (n,) float32 array");
    xn = py::reinterpret_borrow<F32C>(xn_obj);
    if (xn.ndim() != 1 || xn.shape(0) != n) throw std::invalid_argument("xn must be a contiguous (n,) float32 array");
    xp = xn.data();
  }
  if (n == 0) return;
  const float *x = X.data(), *cp = Cp.data(), *c = C.data(), *cnp = cn.data();
  int64_t* lab = labels.mutable_data();
  float* o = d2.mutable_data();
  const DotFn dot = dot_fn();
  py::gil_scoped_release nogil;
  for_blocks(n, Np, f32_threads((double)n * (double)k * (double)d), [&](ptrdiff_t blk, float* G) {
    const ptrdiff_t r0 = blk * BLOCK_ROWS;
    const int rs = (int)(n - r0 < BLOCK_ROWS ? n - r0 : BLOCK_ROWS);
    dot(x + r0 * d, d, rs, cp, Np, d, G);
    for (int r = 0; r < rs; ++r) {
      const ptrdiff_t i = r0 + r;
      float* g = G + r * Np;
      for (ptrdiff_t j = 0; j < k; ++j) g[j] = cnp[j] + -2.0f * g[j];   // as addmm(cn, x, Cᵀ, alpha=-2)
      float m = g[0];
      for (ptrdiff_t j = 1; j < k; ++j) m = g[j] < m ? g[j] : m;
      ptrdiff_t a = 0;
      while (a + 1 < k && g[a] != m) ++a;   // the first index attaining the minimum (a NaN row stops at k - 1)
      lab[i] = a;
      if (xp) {
        const float t = xp[i] + m;
        o[i] = t > 0.0f ? t : 0.0f;
        continue;
      }
      const float* xr = x + i * d;
      const float* cr = c + a * d;
      double acc = 0.0;
#pragma omp simd reduction(+ : acc)
      for (ptrdiff_t t = 0; t < d; ++t) {
        const double v = (double)xr[t] - (double)cr[t];
        acc += v * v;
      }
      o[i] = (float)acc;
    }
  });
}

}  // namespace

void register_gemm_f32(py::module_& m) {
  m.def("f32_pack_b", &f32_pack_b, py::arg("C"), "Cᵀ of a (k, d) float32 matrix, zero-padded to (d, k rounded up to 16).");
  m.def("gemm_f32", &gemm_f32, py::arg("A"), py::arg("Bp"), py::arg("N"), py::arg("out"), py::arg("alpha") = 1.0,
        py::arg("bias") = py::none(), "out = bias + alpha · A·B (B packed by f32_pack_b), fp32, threads by size.");
  m.def("kmeans_assign_f32", &kmeans_assign_f32, py::arg("X"), py::arg("Cp"), py::arg("C"), py::arg("cn"),
        py::arg("labels"), py::arg("d2"), py::arg("xn") = py::none(),
        "Nearest centre per row from fp32 distance tiles, first arg-min fused; d2 exact (or ‖x‖² + G_min with xn).");
}

}  // namespace contextrag
