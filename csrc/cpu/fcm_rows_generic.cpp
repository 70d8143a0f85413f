// The FCM epilogue for any CPU (no target pragma); see fcm_rows.h.
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#define CR_NS generic
#include "fcm_rows.h"
