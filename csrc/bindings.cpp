// contextrag._C: CPU kernels always, CUDA kernels when compiled with CONTEXTRAG_WITH_CUDA.
// Each op family registers its own functions (csrc/cpu/bindings_cpu.cpp, csrc/cuda/bindings_cuda.cpp).
#include <pybind11/pybind11.h>
#include <omp.h>

#include "semiring_mode.h"

namespace py = pybind11;

namespace contextrag {
void register_cpu(py::module_& m);
#ifdef CONTEXTRAG_WITH_CUDA
void register_cuda(py::module_& m);
#endif
}  // namespace contextrag

PYBIND11_MODULE(_C, m) {
  m.doc() = "contextrag native kernels";
  m.def("cuda_compiled", []() {
#ifdef CONTEXTRAG_WITH_CUDA
    return true;
#else
    return false;
#endif
  }, "True when the CUDA kernels were compiled into this module");
  m.def("omp_max_threads", []() { return omp_get_max_threads(); });
  py::enum_<contextrag::SemiringMode>(m, "SemiringMode", "The semiring products (csrc/semiring_mode.h)")
      .value("min_plus", contextrag::SemiringMode::min_plus, "min(1, 1 + min_k (B - A)): luk_up, luk_down")
      .value("max_plus", contextrag::SemiringMode::max_plus, "max(0, max_k (A + B) - 1): fuzzy_route")
      .value("min_sum", contextrag::SemiringMode::min_sum, "sum_k min(A, B): meet_cardinality");
  contextrag::register_cpu(m);
#ifdef CONTEXTRAG_WITH_CUDA
  py::module_ cu = m.def_submodule("cuda", "CUDA kernels taking raw device pointers and a stream");
  contextrag::register_cuda(cu);
#endif
}
