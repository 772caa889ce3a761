/* devices.c - how many CUDA devices this process can use (for --devices all). Without CUDA: 0. */
#include "mv_backend.h"

#ifdef MV_HAVE_CUDA
#include <cuda_runtime_api.h>

int mv_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess)
        return 0;
    return n;
}
#else
int mv_cuda_device_count(void) { return 0; }
#endif
