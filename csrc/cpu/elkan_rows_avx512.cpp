// The bounded Lloyd row loops compiled for AVX-512 (selected at run time by kmeans_cpu.cpp).
// Only C headers and intrinsics are included, all before the target pragma (see elkan_rows.h).
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma")
#define CR_NS avx512
#include "elkan_rows.h"
#pragma GCC pop_options
#endif
