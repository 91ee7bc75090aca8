// nvcc's own version, for the loaded-artifact identity (seed 0x0BA): only a
// file nvcc compiles can see __CUDACC_VER_*__.
#include <stdio.h>

extern "C" const char *attn_cuda_nvcc_version(void)
{
    static char v[32];
    snprintf(v, sizeof v, "%d.%d.%d", __CUDACC_VER_MAJOR__, __CUDACC_VER_MINOR__,
             __CUDACC_VER_BUILD__);
    return v;
}
