// Semiring kernels for any CPU (no target pragma); selected at run time by semiring.cpp when the
// machine has neither AVX-512 nor AVX2, or when CONTEXTRAG_ISA=generic.
#include <cstddef>
#include <cstdlib>
#include <omp.h>

#include "semiring_mode.h"  // a plain enum: no standard library
#define CR_NS generic
#include "semiring_kernels.h"
