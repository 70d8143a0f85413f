// Semiring kernels compiled for one instruction set (avx2); selected at run time by semiring.cpp.
// Only C headers and intrinsics are included, all before the target pragma (see semiring_kernels.h).
#include <cstddef>
#include <cstdlib>
#include <omp.h>

#include "semiring_mode.h"  // a plain enum: no standard library
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#pragma GCC push_options
#pragma GCC target("avx2")
#define CR_ISA_AVX2 1
#define CR_NS avx2
#include "semiring_kernels.h"
#pragma GCC pop_options
#define CR_HAVE_ISA 1
#endif
