// The encoder's row kernels (encoder_rows.h) for any CPU (no target pragma).
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#define CR_NS generic
#include "encoder_rows.h"
