// Łukasiewicz up/down and fuzzy routing with a sparse (CSR/CSC) incidence.
//
// The incidence is given as L "lines" (rows of a CSR or columns of a CSC matrix), line ℓ holding the
// entries (k, v) with k indexing the K columns of the dense operand Bc (S, K). Missing entries are
// incidence 0, which matters differently per op:
//
//   luk   : out[ℓ, s] = min(1, 1 + min( min_{(k,v)∈ℓ} (v − Bc[s,k]),  min_{k∉ℓ} (0 − Bc[s,k]) ))
//           The second term is −(largest Bc[s,k] over k not in line ℓ). We keep, per set s, its
//           T = min(K, max line length + 1) largest degrees in descending order; at least one of them
//           is outside any line, and the first such one is the largest absent degree.
//   route : out[ℓ, s] = max(0, max_{(k,v)∈ℓ} (Bc[s,k] + v) − 1)
//           A missing entry gives Bc + 0 − 1 ≤ 0, which the clamp at 0 removes: only entries count.
//
// Each term is the same single rounding as the dense reference (v − a, or a + v), and min/max are
// exact, so results equal the densified reference bit for bit. Output is (L, S); the caller transposes.
// Inner loops run over s (contiguous in Bcᵀ), compiled per ISA with target attributes.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "isa.h"

namespace py = pybind11;

namespace contextrag {
namespace {

// acc[s] = min(acc[s], v − row[s])  /  acc[s] = max(acc[s], row[s] + v), one version per ISA.
#define CR_SPARSE_LOOPS(T, suffix, attr)                                                       \
  attr static void minsub_##suffix(T* __restrict acc, const T* __restrict row, T v, ptrdiff_t S) { \
    for (ptrdiff_t s = 0; s < S; ++s) {                                                        \
      T t = v - row[s];                                                                        \
      acc[s] = t < acc[s] ? t : acc[s];                                                        \
    }                                                                                          \
  }                                                                                            \
  attr static void maxadd_##suffix(T* __restrict acc, const T* __restrict row, T v, ptrdiff_t S) { \
    for (ptrdiff_t s = 0; s < S; ++s) {                                                        \
      T t = row[s] + v;                                                                        \
      acc[s] = t > acc[s] ? t : acc[s];                                                        \
    }                                                                                          \
  }

#if defined(__x86_64__) || defined(__i386__)
#define CR_ATTR_512 __attribute__((target("avx512f,avx2")))
#define CR_ATTR_2 __attribute__((target("avx2")))
CR_SPARSE_LOOPS(float, f32_avx512, CR_ATTR_512)
CR_SPARSE_LOOPS(double, f64_avx512, CR_ATTR_512)
CR_SPARSE_LOOPS(float, f32_avx2, CR_ATTR_2)
CR_SPARSE_LOOPS(double, f64_avx2, CR_ATTR_2)
#endif
CR_SPARSE_LOOPS(float, f32_generic, )
CR_SPARSE_LOOPS(double, f64_generic, )

template <class T>
struct Loops {
  typedef void (*fn)(T*, const T*, T, ptrdiff_t);
  fn minsub, maxadd;
};

template <class T>
static Loops<T> loops() {
  constexpr bool f32 = std::is_same<T, float>::value;
  Isa isa = cpu_isa();
#if defined(__x86_64__) || defined(__i386__)
  if (isa == Isa::avx512) {
    if constexpr (f32) return {&minsub_f32_avx512, &maxadd_f32_avx512};
    else return {&minsub_f64_avx512, &maxadd_f64_avx512};
  }
  if (isa == Isa::avx2) {
    if constexpr (f32) return {&minsub_f32_avx2, &maxadd_f32_avx2};
    else return {&minsub_f64_avx2, &maxadd_f64_avx2};
  }
#endif
  if constexpr (f32) return {&minsub_f32_generic, &maxadd_f32_generic};
  else return {&minsub_f64_generic, &maxadd_f64_generic};
}

template <class T>
static py::array_t<T> sparse_typed(bool luk, const int64_t* indptr, const int64_t* indices, const T* data,
                                   const T* Bc, ptrdiff_t L, ptrdiff_t S, ptrdiff_t K) {
  py::array_t<T> out({L, S});
  T* o = out.mutable_data();
  py::gil_scoped_release nogil;
  const Loops<T> fn = loops<T>();
  // Bcᵀ (K, S): the entries of a line then read contiguous rows of S degrees.
  std::vector<T> BcT((size_t)(K * S));
#pragma omp parallel for schedule(static)
  for (ptrdiff_t k = 0; k < K; ++k)
    for (ptrdiff_t s = 0; s < S; ++s) BcT[(size_t)(k * S + s)] = Bc[s * K + k];
  // Per set: its T largest degrees, descending (ties: lower k first, any order would do).
  ptrdiff_t maxlen = 0;
  for (ptrdiff_t l = 0; l < L; ++l) maxlen = std::max<ptrdiff_t>(maxlen, indptr[l + 1] - indptr[l]);
  const ptrdiff_t Tn = luk ? std::min<ptrdiff_t>(K, maxlen + 1) : 0;
  std::vector<int64_t> topi((size_t)(S * Tn));
  std::vector<T> topv((size_t)(S * Tn));
  if (Tn > 0) {
#pragma omp parallel
    {
      std::vector<int64_t> idx((size_t)K);
#pragma omp for schedule(dynamic, 1)
      for (ptrdiff_t s = 0; s < S; ++s) {
        const T* b = Bc + s * K;
        for (ptrdiff_t k = 0; k < K; ++k) idx[(size_t)k] = k;
        auto desc = [b](int64_t x, int64_t y) { return b[x] > b[y] || (b[x] == b[y] && x < y); };
        if (Tn < K) std::nth_element(idx.begin(), idx.begin() + Tn, idx.end(), desc);
        std::sort(idx.begin(), idx.begin() + Tn, desc);
        for (ptrdiff_t j = 0; j < Tn; ++j) {
          topi[(size_t)(s * Tn + j)] = idx[(size_t)j];
          topv[(size_t)(s * Tn + j)] = b[idx[(size_t)j]];
        }
      }
    }
  }
  const T inf = std::numeric_limits<T>::infinity();
#pragma omp parallel
  {
    std::vector<T> acc((size_t)S);
    std::vector<unsigned char> present(luk ? (size_t)K : 0, 0);
#pragma omp for schedule(dynamic, 64)
    for (ptrdiff_t l = 0; l < L; ++l) {
      std::fill(acc.begin(), acc.end(), luk ? inf : -inf);
      const int64_t e0 = indptr[l], e1 = indptr[l + 1];
      for (int64_t e = e0; e < e1; ++e) {
        const T* row = BcT.data() + indices[e] * S;
        if (luk) {
          fn.minsub(acc.data(), row, data[e], S);
          present[(size_t)indices[e]] = 1;
        } else {
          fn.maxadd(acc.data(), row, data[e], S);
        }
      }
      T* ol = o + l * S;
      if (luk) {
        if (e1 - e0 < K) {  // some k is absent: its term is 0 − Bc[s,k]
          for (ptrdiff_t s = 0; s < S; ++s) {
            const int64_t* ti = topi.data() + s * Tn;
            ptrdiff_t j = 0;
            while (present[(size_t)ti[j]]) ++j;  // terminates: Tn > line length
            const T t = T(0) - topv[(size_t)(s * Tn + j)];
            if (t < acc[(size_t)s]) acc[(size_t)s] = t;
          }
        }
        for (int64_t e = e0; e < e1; ++e) present[(size_t)indices[e]] = 0;
        for (ptrdiff_t s = 0; s < S; ++s) {
          const T t = T(1) + acc[(size_t)s];
          ol[s] = t < T(1) ? t : T(1);
        }
      } else {
        for (ptrdiff_t s = 0; s < S; ++s) {
          const T t = acc[(size_t)s] - T(1);
          ol[s] = t > T(0) ? t : T(0);
        }
      }
    }
  }
  return out;
}

// Python: sparse_semiring(op, indptr, indices, data, Bc) -> (L, S); op "luk" or "route".
static py::array sparse_semiring(const std::string& op, const py::array_t<int64_t>& indptr,
                                 const py::array_t<int64_t>& indices, const py::array& data, const py::array& Bc) {
  if (op != "luk" && op != "route") throw std::invalid_argument("op must be 'luk' or 'route', got '" + op + "'");
  for (auto* a : {&indptr, &indices})
    if (a->ndim() != 1 || !(a->flags() & py::array::c_style))
      throw std::invalid_argument("indptr and indices must be contiguous 1-D int64 arrays");
  if (Bc.ndim() != 2 || !(Bc.flags() & py::array::c_style))
    throw std::invalid_argument("Bc must be a C-contiguous 2-D array");
  if (data.ndim() != 1 || !(data.flags() & py::array::c_style))
    throw std::invalid_argument("data must be a contiguous 1-D array");
  if (!data.dtype().is(Bc.dtype())) throw py::type_error("data and Bc must have the same dtype");
  const ptrdiff_t L = indptr.shape(0) - 1, S = Bc.shape(0), K = Bc.shape(1);
  if (L < 0) throw std::invalid_argument("indptr must have at least one element");
  const int64_t* ip = indptr.data();
  const int64_t* ix = indices.data();
  const int64_t nnz = indices.shape(0);
  if (data.shape(0) != nnz) throw std::invalid_argument("data and indices must have the same length");
  if (ip[0] != 0 || ip[L] != nnz) throw std::invalid_argument("indptr must start at 0 and end at nnz");
  for (ptrdiff_t l = 0; l < L; ++l)
    if (ip[l + 1] < ip[l]) throw std::invalid_argument("indptr must be non-decreasing");
  for (int64_t e = 0; e < nnz; ++e)
    if (ix[e] < 0 || ix[e] >= K) throw std::invalid_argument("indices out of range for Bc's columns");
  if (op == "luk")  // the absent-term walk needs each index at most once per line
    for (ptrdiff_t l = 0; l < L; ++l)
      for (int64_t e = ip[l] + 1; e < ip[l + 1]; ++e)
        if (ix[e] <= ix[e - 1]) throw std::invalid_argument("indices must be sorted and unique within each line");
  const bool luk = op == "luk";
  if (Bc.dtype().is(py::dtype::of<float>()))
    return sparse_typed<float>(luk, ip, ix, static_cast<const float*>(data.data()),
                               static_cast<const float*>(Bc.data()), L, S, K);
  if (Bc.dtype().is(py::dtype::of<double>()))
    return sparse_typed<double>(luk, ip, ix, static_cast<const double*>(data.data()),
                                static_cast<const double*>(Bc.data()), L, S, K);
  throw py::type_error("data and Bc must be float32 or float64");
}

}  // namespace

void register_sparse(py::module_& m) {
  m.def("sparse_semiring", &sparse_semiring, py::arg("op"), py::arg("indptr"), py::arg("indices"),
        py::arg("data"), py::arg("Bc"),
        "Sparse-incidence luk ('luk') or routing ('route'); returns (lines, S).");
}

}  // namespace contextrag
