// Run-time instruction-set selection for the CPU kernels (the wheel is built without -march).
#pragma once
#include <cstddef>
#include <string>

#include "semiring_mode.h"

namespace contextrag {

enum class Isa { generic = 0, avx2 = 1, avx512 = 2 };

Isa cpu_isa();                        // the ISA in use (best supported, or CONTEXTRAG_ISA)
const std::string& isa_env_error();   // why CONTEXTRAG_ISA was not honoured ("" if unset or honoured)
bool isa_supported(Isa isa);          // whether this machine (and OS) can run it
void set_cpu_isa(const std::string& name);  // "avx512" | "avx2" | "generic" | "auto"; raises if unsupported
const char* isa_name(Isa isa);
bool amx_supported();   // AMX-BF16 tiles: the CPU has them and the OS lets this process use them (gemm_amx.cpp)
bool amx_allowed();     // the dispatch allows them: AVX-512 in use, CONTEXTRAG_ISA auto/unset or "amx"
bool amx_active();      // both: the bf16 GEMMs run on AMX tiles

#define CR_DECLARE_ISA(ns)                                                                          \
  namespace ns {                                                                                   \
  void semiring_f32(SemiringMode op, const float* Bc, const float* V, float* out, ptrdiff_t S, ptrdiff_t G,  \
                    ptrdiff_t M, int skip_zeros);                                                  \
  void semiring_f64(SemiringMode op, const double* Bc, const double* V, double* out, ptrdiff_t S,          \
                    ptrdiff_t G, ptrdiff_t M, int skip_zeros);                                     \
  void meet_rows_f32(const float* A, const float* B, float* out, ptrdiff_t P, ptrdiff_t Q, ptrdiff_t G);   \
  void meet_rows_f64(const double* A, const double* B, double* out, ptrdiff_t P, ptrdiff_t Q,             \
                     ptrdiff_t G);                                                                 \
  void route_rows_f32(const float* mu, const float* I, const ptrdiff_t* idx, float* out, ptrdiff_t Q,      \
                      ptrdiff_t V, ptrdiff_t m);                                                   \
  void route_rows_f64(const double* mu, const double* I, const ptrdiff_t* idx, double* out, ptrdiff_t Q,   \
                      ptrdiff_t V, ptrdiff_t m);                                                   \
  }
CR_DECLARE_ISA(generic)
#if defined(__x86_64__) || defined(__i386__)
CR_DECLARE_ISA(avx2)
CR_DECLARE_ISA(avx512)
#endif
#undef CR_DECLARE_ISA

// &ns::name for the ISA v (cpu_isa(): best supported, or forced by CONTEXTRAG_ISA), ns one of the
// per-ISA namespaces above.
#if defined(__x86_64__) || defined(__i386__)
#define CR_PICK_ISA(v, name) \
  ((v) == Isa::avx512 ? &avx512::name : (v) == Isa::avx2 ? &avx2::name : &generic::name)
#else
#define CR_PICK_ISA(v, name) (&generic::name)
#endif

}  // namespace contextrag
