// The transformer encoder's row kernels for the CPU embedder (embed/bert_cpu.py): argument checks
// and ISA dispatch for encoder_rows.h, compiled per instruction set. Activations are bf16 bits in
// uint16 arrays (torch's bfloat16 tensors viewed as int16 cross without a copy); math is fp32.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "isa.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>

namespace py = pybind11;

namespace contextrag {
#define CR_DECLARE_ENCODER(ns)                                                                        \
  namespace ns {                                                                                     \
  int attention_bf16(const unsigned short*, const float*, const long long*, unsigned short*,        \
                      ptrdiff_t, ptrdiff_t, ptrdiff_t, ptrdiff_t, float, int, int);                  \
  void add_layer_norm_bf16(float*, const unsigned short*, const float*, const float*, const float*,   \
                           float, unsigned short*, ptrdiff_t, ptrdiff_t, int);                       \
  void bias_gelu_bf16(unsigned short*, const float*, ptrdiff_t, ptrdiff_t, int);                     \
  }
CR_DECLARE_ENCODER(generic)
#if defined(__x86_64__) || defined(__i386__)
CR_DECLARE_ENCODER(avx2)
CR_DECLARE_ENCODER(avx512)
#endif
#undef CR_DECLARE_ENCODER

namespace {

using Bits = py::array_t<uint16_t, py::array::c_style>;

// bf16 bits as a C-contiguous array of 2-byte integers (torch's bfloat16 viewed as int16 or uint16),
// read in place.
py::array bf16_bits(const py::array& a, const char* name, ptrdiff_t ndim) {
  if ((a.dtype().kind() != 'u' && a.dtype().kind() != 'i') || a.itemsize() != 2 || a.ndim() != ndim)
    throw std::invalid_argument(std::string(name) + " must be a " + std::to_string(ndim) +
                                "-D array of bf16 bits (uint16 or int16), got ndim " + std::to_string(a.ndim()) +
                                " dtype kind '" + a.dtype().kind() + "' itemsize " + std::to_string(a.itemsize()));
  return py::array::ensure(a, py::array::c_style);
}

using F32 = py::array_t<float, py::array::c_style | py::array::forcecast>;

// threads: the kernel's team size, or 0 for OpenMP's default.
int team_size(long long threads) {
  if (threads < 0 || threads > 4096)
    throw std::invalid_argument("threads must be 0 (OpenMP's default) or a count in [1, 4096], got " +
                                std::to_string(threads));
  return static_cast<int>(threads);
}

// A 1-D float32 vector of length n (a bias, a LayerNorm weight); zeros where `a` is None.
F32 vector_f32(const py::object& a, ptrdiff_t n, const char* name) {
  if (a.is_none()) {
    F32 z(n);
    std::fill(z.mutable_data(), z.mutable_data() + n, 0.0f);
    return z;
  }
  F32 v = F32::ensure(a);
  if (!v || v.ndim() != 1 || v.shape(0) != n)
    throw std::invalid_argument(std::string(name) + " must be a 1-D float array of length " + std::to_string(n));
  return v;
}

// encoder_attention(qkv (B·L, 3·H·d) bf16 bits, lengths (B,) int, heads, scale, bias (3·H·d) or None)
// -> (B·L, H·d) bf16 bits
Bits encoder_attention(const py::array& qkv_, const py::array& lengths_, ptrdiff_t heads, double scale,
                       const py::object& bias_, long long threads) {
  const int nt = team_size(threads);
  const py::array qkv = bf16_bits(qkv_, "qkv", 2);
  if (lengths_.ndim() != 1 || lengths_.dtype().kind() != 'i')
    throw std::invalid_argument("lengths must be a 1-D integer array");
  auto len = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(lengths_);
  if (heads < 1) throw std::invalid_argument("heads must be >= 1, got " + std::to_string(heads));
  if (!(scale > 0) || !std::isfinite(scale))
    throw std::invalid_argument("scale must be a finite number > 0, got " + std::to_string(scale));
  const ptrdiff_t B = len.shape(0), rows = qkv.shape(0), cols = qkv.shape(1);
  if (B < 1 || rows % B != 0)
    throw std::invalid_argument("qkv must have B·L rows for the " + std::to_string(B) + " lengths, got " +
                                std::to_string(rows));
  if (cols % (3 * heads) != 0 || cols == 0)
    throw std::invalid_argument("qkv must have 3·heads·d columns, got " + std::to_string(cols) + " for " +
                                std::to_string(heads) + " heads");
  const ptrdiff_t L = rows / B, d = cols / (3 * heads);
  if (d > 256) throw std::invalid_argument("head dimension must be <= 256, got " + std::to_string(d));
  const int64_t* l = len.data();
  for (ptrdiff_t b = 0; b < B; ++b)
    if (l[b] < 0 || l[b] > L)
      throw std::invalid_argument("lengths must lie in [0, " + std::to_string(L) + "], got " + std::to_string(l[b]));
  const F32 bias = vector_f32(bias_, cols, "bias");
  Bits out({rows, heads * d});
  const uint16_t* q = static_cast<const uint16_t*>(qkv.data());
  uint16_t* o = out.mutable_data();
  const auto fn = CR_PICK_ISA(cpu_isa(), attention_bf16);
  const int amx = amx_active() ? 1 : 0;    // the AVX-512 kernels run the heads on the tiles
  int failed;
  {
    py::gil_scoped_release nogil;
    failed = fn(q, bias.data(), reinterpret_cast<const long long*>(l), o, B, L, heads, d, static_cast<float>(scale),
                amx, nt);
  }
  if (failed) throw std::bad_alloc();
  return out;
}

// add_layer_norm(h (M, C) float32 in place, y (M, C) bf16 bits, gamma, beta, eps, bias (C) or None)
// -> bf16 bits of the new h
Bits add_layer_norm(py::array_t<float, py::array::c_style> h, const py::array& y_, const py::object& gamma_,
                    const py::object& beta_, double eps, const py::object& bias_, long long threads) {
  const int nt = team_size(threads);
  if (h.ndim() != 2) throw std::invalid_argument("h must be 2-D float32, got ndim " + std::to_string(h.ndim()));
  if (!h.writeable()) throw std::invalid_argument("h must be writeable (it is updated in place)");
  const py::array y = bf16_bits(y_, "y", 2);
  if (y.shape(0) != h.shape(0) || y.shape(1) != h.shape(1))
    throw std::invalid_argument("y must have h's shape (" + std::to_string(h.shape(0)) + ", " +
                                std::to_string(h.shape(1)) + "), got (" + std::to_string(y.shape(0)) + ", " +
                                std::to_string(y.shape(1)) + ")");
  if (!(eps > 0)) throw std::invalid_argument("eps must be > 0");
  const ptrdiff_t M = h.shape(0), C = h.shape(1);
  if (gamma_.is_none() || beta_.is_none()) throw std::invalid_argument("gamma and beta are required");
  const F32 gamma = vector_f32(gamma_, C, "gamma"), beta = vector_f32(beta_, C, "beta"),
            bias = vector_f32(bias_, C, "bias");
  Bits out({M, C});
  float* hp = h.mutable_data();
  const uint16_t* yp = static_cast<const uint16_t*>(y.data());
  uint16_t* o = out.mutable_data();
  const auto fn = CR_PICK_ISA(cpu_isa(), add_layer_norm_bf16);
  {
    py::gil_scoped_release nogil;
    fn(hp, yp, bias.data(), gamma.data(), beta.data(), static_cast<float>(eps), o, M, C, nt);
  }
  return out;
}

// bias_gelu(y (M, N) bf16 bits, in place, bias (N) or None): y <- GELU(y + bias), exact (erf) form
void bias_gelu(py::array y_, const py::object& bias_, long long threads) {
  const int nt = team_size(threads);
  if (!y_.writeable()) throw std::invalid_argument("y must be writeable (it is updated in place)");
  if ((y_.dtype().kind() != 'u' && y_.dtype().kind() != 'i') || y_.itemsize() != 2 || y_.ndim() != 2 ||
      !(y_.flags() & py::array::c_style))
    throw std::invalid_argument("y must be a C-contiguous 2-D array of bf16 bits (uint16 or int16)");
  const ptrdiff_t M = y_.shape(0), N = y_.shape(1);
  const F32 bias = vector_f32(bias_, N, "bias");
  uint16_t* yp = static_cast<uint16_t*>(y_.mutable_data());
  const auto fn = CR_PICK_ISA(cpu_isa(), bias_gelu_bf16);
  py::gil_scoped_release nogil;
  fn(yp, bias.data(), M, N, nt);
}

}  // namespace

void register_encoder(py::module_& m) {
  m.def("encoder_attention", &encoder_attention, py::arg("qkv"), py::arg("lengths"), py::arg("heads"),
        py::arg("scale"), py::arg("bias") = py::none(), py::arg("threads") = 0,
        "softmax(q·kᵀ·scale)·v per head over each sequence's first lengths[b] tokens, q, k, v plus bias; "
        "qkv (B·L, 3·H·d) and the result (B·L, H·d) are bf16 bits (uint16), fp32 arithmetic, padded rows zero; "
        "threads: OpenMP team size (0: the default)");
  m.def("add_layer_norm", &add_layer_norm, py::arg("h").noconvert(), py::arg("y"), py::arg("gamma"),
        py::arg("beta"), py::arg("eps"), py::arg("bias") = py::none(), py::arg("threads") = 0,
        "h <- LayerNorm(h + y + bias) in place (h float32, y bf16 bits); returns h's bf16 bits (uint16); "
        "threads: OpenMP team size (0: the default)");
  m.def("bias_gelu", &bias_gelu, py::arg("y"), py::arg("bias") = py::none(), py::arg("threads") = 0,
        "y <- GELU(y + bias) in place (exact erf form), y bf16 bits (uint16), fp32 arithmetic; "
        "threads: OpenMP team size (0: the default)");
}
}  // namespace contextrag
