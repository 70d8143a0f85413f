// Semiring kernels for any CPU (no target pragma); selected at run time by semiring.cpp when the
// machine has neither AVX-512 nor AVX2, or when CONTEXTRAG_CPU_ISA=generic.
#include <cstddef>
#include <cstdlib>
#include <omp.h>
#define CR_NS generic
#include "semiring_kernels.h"
