// The clustering row loops (elkan_rows.h, fcm_rows.h, gemm_f32_rows.h) compiled for AVX2 + FMA (most laptops and many
// cloud VMs have no AVX-512); kmeans.cpp and fcm.cpp pick them at run time. Only C headers and intrinsics are
// included, all before the target pragma.
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#define CR_NS avx2
#include "elkan_rows.h"
#include "fcm_rows.h"
#define CR_F32_VW 8
#include "gemm_f32_rows.h"
#pragma GCC pop_options
#endif
