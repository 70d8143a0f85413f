// CUDA op registrations: functions take device pointers (ints), shapes and a cudaStream_t handle,
// so the extension is not built against torch. Filled in per op family.
#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace contextrag {
void register_cuda(py::module_& m) { (void)m; }
}  // namespace contextrag
