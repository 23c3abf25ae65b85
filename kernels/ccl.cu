// ccl kernels (work in progress)
#include "common/util.cuh"
