// The encoder's row kernels (encoder_rows.h) compiled for AVX-512; encoder.cpp picks them at run
// time. Only C headers and intrinsics are included, all before the target pragma.
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include "gemm_amx.h"   // amx_dots and the per-thread tile configuration (gemm_amx.cpp)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma")
#define CR_NS avx512
#define CR_ENCODER_AMX 1
#include "encoder_rows.h"
#pragma GCC pop_options
#endif
