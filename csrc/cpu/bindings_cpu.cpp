// CPU op registrations (filled in per op family).
#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace contextrag {
void register_cpu(py::module_& m) { (void)m; }
}  // namespace contextrag
