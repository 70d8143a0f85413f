// The FCM epilogue compiled for AVX-512 (selected at run time by kmeans_cpu.cpp's fcm_epilogue).
// Only C headers and intrinsics are included, all before the target pragma (see fcm_rows.h).
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma")
#define CR_NS avx512
#include "fcm_rows.h"
#pragma GCC pop_options
#endif
