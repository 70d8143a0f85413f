// contextrag._C: CPU kernels always, CUDA kernels when compiled with CONTEXTRAG_WITH_CUDA.
#include <pybind11/pybind11.h>
#include <pybind11/numpy.h>
#include <omp.h>

namespace py = pybind11;

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
}
