/* cuda_stub.c - the CUDA backend's entry points (mv_backend.h) in a build without CUDA (make
 * NO_CUDA=1, or no nvcc found): mv_backend_cuda_create refuses with a message, mv_cuda_available
 * and mv_cuda_device_count say 0, mv_cuda_prewarm does nothing (and mv_backend_cuda_settings, which no backend of this build
 * reaches, says so). With CUDA, cu/tower_cuda.cu defines them and this file compiles to nothing. */
#include "mv_backend.h"

#ifndef MV_HAVE_CUDA
mv_status mv_backend_cuda_create(const mv_model *m, const mv_backend_opts *o, mv_backend **out,
                                 mv_err *e)
{
    (void)m;
    (void)o;
    *out = NULL;
    return mv_fail(e, MV_ERR_UNSUPPORTED, "this mvembed was built without CUDA");
}

int mv_cuda_available(void) { return 0; }

int mv_cuda_device_count(void) { return 0; }

void mv_cuda_prewarm(int device) { (void)device; }

const char *mv_backend_cuda_settings(const mv_backend *b)
{
    (void)b;
    return "backend=cuda-not-built";
}
#else
typedef int mv_cuda_stub_unused; /* ISO C forbids an empty translation unit */
#endif
