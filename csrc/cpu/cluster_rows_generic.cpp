// The clustering row loops (elkan_rows.h, fcm_rows.h, gemm_f32_rows.h) for any CPU (no target pragma).
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#define CR_NS generic
#include "elkan_rows.h"
#include "fcm_rows.h"
#define CR_F32_VW 0
#include "gemm_f32_rows.h"
