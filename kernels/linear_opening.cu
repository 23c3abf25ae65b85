// linear_opening kernels (work in progress)
#include "common/util.cuh"
