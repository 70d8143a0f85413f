// CUDA op registrations: functions take device pointers (ints), shapes, dtype codes and a
// cudaStream_t handle (an int), so the extension is not built against torch. From torch:
// t.data_ptr() and torch.cuda.current_stream().cuda_stream; from CuPy:
// a.__cuda_array_interface__["data"][0] and cupy.cuda.get_current_stream().ptr.
// Errors (bad arguments, launch failures) raise RuntimeError with the CUDA message.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <stdexcept>
#include <string>

#include "launch.h"
#include "spread.h"

namespace py = pybind11;

namespace contextrag {
namespace {
namespace cu = contextrag::cuda;

void ok(const std::string& err) {
  if (!err.empty()) throw std::runtime_error(err);
}

// Runs a host launcher without the GIL and raises its error string, if any, with the GIL held.
template <typename Launcher>
void launch(Launcher&& run) {
  std::string err;
  {
    py::gil_scoped_release nogil;
    err = run();
  }
  ok(err);
}

// dtype codes and the device probe (common.cuh, kmeans.cu)
void register_common(py::module_& m) {
  m.attr("DTYPE_CODES") = py::dict(py::arg("float32") = 0, py::arg("float64") = 1, py::arg("float16") = 2,
                                   py::arg("bfloat16") = 3);
  m.def(
      "probe",
      []() {
        int v[8];
        std::string err;
        {
          py::gil_scoped_release nogil;
          err = cu::probe(v);
        }
        py::dict d;
        d["runtime_version"] = v[0];
        d["driver_version"] = v[1];
        d["device"] = v[2];
        d["compute_capability"] = py::make_tuple(v[3], v[4]);
        d["sms"] = v[5];
        d["smem_optin_bytes"] = v[6];
        d["kernel_ran"] = v[7] == 1;
        d["error"] = err;
        return d;
      },
      "Launch one trivial kernel on the current device: versions, device attributes and the error, if any "
      "(a toolkit newer than the driver fails here, before any real kernel)");
}

// semiring.cu: luk_up/luk_down/fuzzy_route/meet_cardinality
void register_semiring(py::module_& m) {
  m.def(
      "semiring",
      [](SemiringMode op, int dtype, uintptr_t a, uintptr_t b, uintptr_t out, int64_t M, int64_t N, int64_t K, int64_t s_am,
         int64_t s_ak, int64_t s_bk, int64_t s_bn, int split, uintptr_t ws, uintptr_t stream) {
        launch([&] { return cu::semiring(op, dtype, a, b, out, M, N, K, s_am, s_ak, s_bk, s_bn, split, ws,
                                         stream); });
      },
      py::arg("op"), py::arg("dtype"), py::arg("a"), py::arg("b"), py::arg("out"), py::arg("M"), py::arg("N"),
      py::arg("K"), py::arg("s_am"), py::arg("s_ak"), py::arg("s_bk"), py::arg("s_bn"), py::arg("split"),
      py::arg("ws"), py::arg("stream"),
      "out (M,N) row-major = semiring product of A (M,K) and B (K,N) given by element strides. op: a SemiringMode, "
      "min_plus min(1, 1+min_k(B-A)), max_plus max(0, max_k(A+B)-1), min_sum sum_k min(A,B). dtype 0 float32, 1 float64. "
      "split > 1 splits the reduction and needs a workspace ws of split*M*N elements.");
  m.def("semiring_default_split", &cu::semiring_default_split, py::arg("M"), py::arg("N"), py::arg("K"),
        py::arg("sms"), "Reduction splits that fill `sms` multiprocessors for an (M,K)x(K,N) product.");
}

// kmeans.cu, kmeans_wmma.cu: assignment (CUDA cores, tensor cores), update
void register_kmeans(py::module_& m) {
  m.def(
      "kmeans_assign",
      [](int dtype, uintptr_t x, uintptr_t c, uintptr_t cn, uintptr_t labels, uintptr_t d2, int64_t n, int64_t k,
         int64_t d, uintptr_t blk_prob, uintptr_t blk_row0, uintptr_t prob_row1, uintptr_t prob_coff,
         uintptr_t prob_k, int64_t n_blocks, uintptr_t stream) {
        launch([&] {
          return cu::kmeans_assign(dtype, x, c, cn, labels, d2, n, k, d, blk_prob, blk_row0, prob_row1, prob_coff,
                                   prob_k, n_blocks, stream);
        });
      },
      py::arg("dtype"), py::arg("x"), py::arg("c"), py::arg("cn"), py::arg("labels"), py::arg("d2"), py::arg("n"),
      py::arg("k"), py::arg("d"), py::arg("blk_prob"), py::arg("blk_row0"), py::arg("prob_row1"),
      py::arg("prob_coff"), py::arg("prob_k"), py::arg("n_blocks"), py::arg("stream"),
      "Nearest centroid per row of row-major X (n,d) in dtype; C (k,d) in X's dtype, cn = |c|^2 (float32, "
      "float64 for float64 X); writes labels int64 (n,) and squared distances (n,). With a block table "
      "(blk_prob != 0) runs many problems in one launch; labels are problem-local.");
  m.def(
      "kmeans_assign_tc",
      [](int dtype, uintptr_t x, uintptr_t c, uintptr_t cn, uintptr_t labels, uintptr_t d2, int64_t n, int64_t k,
         int64_t d, uintptr_t stream) {
        launch([&] { return cu::kmeans_assign_tc(dtype, x, c, cn, labels, d2, n, k, d, stream); });
      },
      py::arg("dtype"), py::arg("x"), py::arg("c"), py::arg("cn"), py::arg("labels"), py::arg("d2"), py::arg("n"),
      py::arg("k"), py::arg("d"), py::arg("stream"),
      "kmeans_assign on tensor cores (WMMA, fp32 accumulation) for float16/bfloat16 X; same outputs.");
  m.def("assign_rows_per_block", &cu::assign_rows_per_block, "Rows per block of kmeans_assign (block-table granularity)");
  m.def(
      "kmeans_update",
      [](int dtype, uintptr_t x, uintptr_t labels, uintptr_t sums, uintptr_t counts, int64_t n, int64_t k,
         int64_t d, uintptr_t stream) {
        launch([&] { return cu::kmeans_update(dtype, x, labels, sums, counts, n, k, d, stream); });
      },
      py::arg("dtype"), py::arg("x"), py::arg("labels"), py::arg("sums"), py::arg("counts"), py::arg("n"),
      py::arg("k"), py::arg("d"), py::arg("stream"),
      "Adds per-cluster sums into zeroed sums (k,d) (float32; float64 for float64 X) and counts into zeroed int64 (k,).");
}

// fcm.cu: FCM memberships and the shared-memory limit on c
void register_fcm(py::module_& m) {
  m.def(
      "fcm_memberships",
      [](int dtype, uintptr_t x, uintptr_t c, uintptr_t cn, uintptr_t u, int64_t n, int64_t n_centres, int64_t d,
         double p, double snap, uintptr_t stream) {
        launch([&] { return cu::fcm_memberships(dtype, x, c, cn, u, n, n_centres, d, p, snap, stream); });
      },
      py::arg("dtype"), py::arg("x"), py::arg("c"), py::arg("cn"), py::arg("u"), py::arg("n"), py::arg("n_centres"),
      py::arg("d"), py::arg("p"), py::arg("snap"), py::arg("stream"),
      "FCM memberships u (n,c) (float32; float64 for float64 X), p = 1/(m-1); distances below snap*(|x|^2+|c|^2) "
      "count as zero (one-hot row).");
  m.def("fcm_max_centres", &cu::fcm_max_centres, py::arg("dtype"),
        "Largest c fcm_memberships handles for a dtype code on the current device (its shared-memory opt-in "
        "limit), -1 when no device can be queried");
  m.def("fcm_centres_limit", &cu::fcm_centres_limit, py::arg("dtype"), py::arg("optin_bytes"),
        "Largest c fcm_memberships would handle on a device allowing optin_bytes of shared memory per block");
}

// spread.cu: the spreading hop, attributes -> chunks
void register_spread(py::module_& m) {
  m.def(
      "spread_hop",
      [](int dtype, uintptr_t t_indptr, uintptr_t t_indices, uintptr_t t_data, uintptr_t doc, uintptr_t e_q,
         uintptr_t e_a, uintptr_t e_v, uintptr_t e_sdoc, uintptr_t e_self, int64_t n_entries, uintptr_t out,
         int64_t n, uintptr_t stream) {
        launch([&] {
          return cu::spread_hop(dtype, t_indptr, t_indices, t_data, doc, e_q, e_a, e_v, e_sdoc, e_self, n_entries,
                                out, n, stream);
        });
      },
      py::arg("dtype"), py::arg("t_indptr"), py::arg("t_indices"), py::arg("t_data"), py::arg("doc"), py::arg("e_q"),
      py::arg("e_a"), py::arg("e_v"), py::arg("e_sdoc"), py::arg("e_self"), py::arg("n_entries"), py::arg("out"),
      py::arg("n"), py::arg("stream"),
      "Spreading hop, attributes -> chunks: folds v + I(c,a) - 1 into the zero-filled out (Q,n) for every "
      "activation entry (csrc/cuda/spread.h).");
}

}  // namespace

void register_cuda(py::module_& m) {
  register_common(m);
  register_semiring(m);
  register_kmeans(m);
  register_fcm(m);
  register_spread(m);
}
}  // namespace contextrag
