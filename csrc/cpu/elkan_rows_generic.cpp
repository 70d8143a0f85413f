// The bounded Lloyd row loops for any CPU (no target pragma); see elkan_rows.h.
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#define CR_NS generic
#include "elkan_rows.h"
