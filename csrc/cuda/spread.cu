// The attributes → chunks step of the spreading hop (see csrc/cpu/spread.cpp for the definition).
// The chunks → attributes step (a few seed rows) is gathered by the caller into activation entries;
// here one block walks the column of one entry's attribute, its threads striding over the column's
// chunks (coalesced reads of Iᵀ), and folds v + I(c, a) − 1 into out[q, c] with an atomic max.
// Only values > 0 are written into a zero-filled output, and non-negative IEEE floats order like
// their bit patterns as signed integers, so the integer atomicMax is an exact float max.
#include "common.cuh"
#include "launch.h"
#include "spread.h"

namespace contextrag {
namespace cuda {
namespace {

__device__ __forceinline__ void atomic_max_pos(float* p, float v) {
  atomicMax(reinterpret_cast<int*>(p), __float_as_int(v));
}
__device__ __forceinline__ void atomic_max_pos(double* p, double v) {
  atomicMax(reinterpret_cast<long long*>(p), __double_as_longlong(v));
}

template <typename T>
__global__ void spread_kernel(const int64_t* __restrict__ tip, const int64_t* __restrict__ tix,
                              const T* __restrict__ tdv, const int64_t* __restrict__ doc,
                              const int64_t* __restrict__ eq, const int64_t* __restrict__ ea,
                              const T* __restrict__ ev, const int64_t* __restrict__ esdoc,
                              const int64_t* __restrict__ eself, int64_t n_entries, T* __restrict__ out,
                              int64_t n) {
  for (int64_t e = blockIdx.x; e < n_entries; e += gridDim.x) {
    const int64_t a = ea[e], self = eself[e], sdoc = esdoc[e];
    const T v = ev[e];
    T* oq = out + eq[e] * n;
    const bool rule = doc != nullptr && self >= 0;
    for (int64_t p = tip[a] + threadIdx.x; p < tip[a + 1]; p += blockDim.x) {
      const int64_t c = tix[p];
      if (rule && doc[c] == sdoc && c != self) continue;
      const T t = (v + tdv[p]) - T(1);
      if (t > T(0)) atomic_max_pos(oq + c, t);
    }
  }
}

template <typename T>
std::string run(uintptr_t tip, uintptr_t tix, uintptr_t tdv, uintptr_t doc, uintptr_t eq, uintptr_t ea,
                uintptr_t ev, uintptr_t esdoc, uintptr_t eself, int64_t n_entries, uintptr_t out, int64_t n,
                cudaStream_t st) {
  if (n_entries == 0) return std::string();
  const int64_t blocks = n_entries < 65535 * 8 ? n_entries : 65535 * 8;
  spread_kernel<T><<<(unsigned)blocks, 128, 0, st>>>(
      reinterpret_cast<const int64_t*>(tip), reinterpret_cast<const int64_t*>(tix), reinterpret_cast<const T*>(tdv),
      reinterpret_cast<const int64_t*>(doc), reinterpret_cast<const int64_t*>(eq),
      reinterpret_cast<const int64_t*>(ea), reinterpret_cast<const T*>(ev), reinterpret_cast<const int64_t*>(esdoc),
      reinterpret_cast<const int64_t*>(eself), n_entries, reinterpret_cast<T*>(out), n);
  return check_launch("spread_hop");
}

}  // namespace

std::string spread_hop(int dtype, uintptr_t t_indptr, uintptr_t t_indices, uintptr_t t_data, uintptr_t doc,
                       uintptr_t e_q, uintptr_t e_a, uintptr_t e_v, uintptr_t e_sdoc, uintptr_t e_self,
                       int64_t n_entries, uintptr_t out, int64_t n, uintptr_t stream) {
  if (n_entries < 0 || n < 0) return "spread_hop: n_entries and n must be >= 0";
  cudaStream_t st = as_stream(stream);
  if (dtype == kF32)
    return run<float>(t_indptr, t_indices, t_data, doc, e_q, e_a, e_v, e_sdoc, e_self, n_entries, out, n, st);
  if (dtype == kF64)
    return run<double>(t_indptr, t_indices, t_data, doc, e_q, e_a, e_v, e_sdoc, e_self, n_entries, out, n, st);
  return "spread_hop: dtype must be float32 or float64";
}

}  // namespace cuda
}  // namespace contextrag
