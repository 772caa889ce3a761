/* elementwise.cu - dtype conversions (f32 pixels -> T at tower entry, T -> f32 for the output and
 * stage dumps) and in-place activations (the merger's erf GELU; tanh GELU / SiLU when cuBLASLt
 * cannot fuse them into the GEMM). f32 internals, one rounding at the store. CPU twins:
 * mv_gelu_tanh_cpu, mv_gelu_erf_cpu, mv_act_cpu, mv_round_bf16. */
#include "mv_cuda.cuh"

template <typename T> __global__ void from_f32_kernel(T *y, const float *x, int64_t count)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = mv_from_f<T>(x[i]);
}

template <typename T> __global__ void to_f32_kernel(float *y, const T *x, int64_t count)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = mv_to_f(x[i]);
}

static __device__ __forceinline__ float act_f(int act, float x)
{
    if (act == 0) {
        const float k = 0.7978845608028654f; /* sqrt(2/pi) */
        return 0.5f * x * (1.f + tanhf(k * (x + 0.044715f * x * x * x)));
    }
    if (act == 1) return 0.5f * x * (1.f + erff(x * 0.7071067811865476f));
    return x / (1.f + expf(-x));
}

template <typename T> __global__ void act_kernel(T *x, int act, int64_t count)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += (int64_t)gridDim.x * blockDim.x)
        x[i] = mv_from_f<T>(act_f(act, mv_to_f(x[i])));
}

static unsigned grid_for(int64_t count)
{
    int64_t b = (count + 255) / 256;
    return (unsigned)(b > 65536 ? 65536 : (b < 1 ? 1 : b));
}

template <typename T> cudaError_t mv_cuda_from_f32(T *y, const float *x, int64_t count, cudaStream_t st)
{
    if (count <= 0) return cudaSuccess;
    from_f32_kernel<T><<<grid_for(count), 256, 0, st>>>(y, x, count);
    return cudaGetLastError();
}
template <typename T> cudaError_t mv_cuda_to_f32(float *y, const T *x, int64_t count, cudaStream_t st)
{
    if (count <= 0) return cudaSuccess;
    to_f32_kernel<T><<<grid_for(count), 256, 0, st>>>(y, x, count);
    return cudaGetLastError();
}
template <typename T> cudaError_t mv_cuda_act(T *x, int act, int64_t count, cudaStream_t st)
{
    if (count <= 0) return cudaSuccess;
    if (act < 0 || act > 2) return cudaErrorInvalidValue;
    act_kernel<T><<<grid_for(count), 256, 0, st>>>(x, act, count);
    return cudaGetLastError();
}

template cudaError_t mv_cuda_from_f32<float>(float *, const float *, int64_t, cudaStream_t);
template cudaError_t mv_cuda_from_f32<bf16>(bf16 *, const float *, int64_t, cudaStream_t);
template cudaError_t mv_cuda_to_f32<float>(float *, const float *, int64_t, cudaStream_t);
template cudaError_t mv_cuda_to_f32<bf16>(float *, const bf16 *, int64_t, cudaStream_t);
template cudaError_t mv_cuda_act<float>(float *, int, int64_t, cudaStream_t);
template cudaError_t mv_cuda_act<bf16>(bf16 *, int, int64_t, cudaStream_t);

mv_status mv_cuda_check(cudaError_t r, mv_err *e, const char *what)
{
    if (r == cudaSuccess) return MV_OK;
    if (r == cudaErrorMemoryAllocation)
        return mv_fail(e, MV_ERR_NOMEM, "cuda: %s: out of GPU memory (%s)", what,
                       cudaGetErrorString(r));
    return mv_fail(e, MV_ERR_DEVICE, "cuda: %s: %s", what, cudaGetErrorString(r));
}
