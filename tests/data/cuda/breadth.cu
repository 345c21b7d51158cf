// Many everyday CUDA features in one file: what nvcc makes of them is read strictly where the
// tables have the form, and each remaining line belongs to a family the tables lack.
#include <cstdio>
#include <cuda_fp16.h>
__device__ float g_acc;
extern "C" __global__ void breadth(const float* __restrict__ x, float* y, const __half* h, __half* ho,
                                   unsigned* u, double* d, long long* ll, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = __ldg(&x[i]);
  float w = __fdividef(v, 3.0f) + sqrtf(fabsf(v)) + rsqrtf(v * v + 1.0f) + __expf(v) + __logf(fabsf(v) + 1.0f);
  w += __sinf(v) * __cosf(v) + fminf(v, 2.0f) + fmaxf(v, -2.0f) + truncf(v) + floorf(v) + ceilf(v) + rintf(v);
  w += tanhf(v) + copysignf(1.0f, v) + (isnan(v) ? 1.0f : 0.0f);
  y[i] = w;
  __half a = h[i], b = h[(i + 1) % n];
  ho[i] = __hadd(__hmul(a, b), __float2half(w));
  unsigned m = u[i];
  m = __popc(m) + __clz(m) + __brev(m) + __ffs(m) + __byte_perm(m, 7u, 0x3210) + __funnelshift_l(m, m, 5);
  m += __umulhi(m, 12345u) + (m >> 3) + ((int)m >> 2) + __sad(m, 3u, 1u);
  unsigned ballot = __ballot_sync(0xffffffffu, m & 1);
  m += ballot + __any_sync(0xffffffffu, m > 5) + __all_sync(0xffffffffu, m > 1) + __activemask();
  m += __shfl_sync(0xffffffffu, m, 3) + __shfl_up_sync(0xffffffffu, m, 1) + __reduce_add_sync(0xffffffffu, m);
  m += __match_any_sync(0xffffffffu, m);
  __syncwarp();
  u[i] = m;
  double dd = d[i];
  d[i] = fma(dd, 2.0, 1.0) / (dd + 3.0) + (double)v + sqrt(fabs(dd));
  ll[i] = (long long)dd * 3 + (long long)clock64() + (ll[i] >> 7);
  atomicAdd(&g_acc, v);
  atomicExch(&u[0], m);
  atomicMin((int*)&u[1], (int)m);
  atomicOr(&u[2], m);
  atomicAdd((unsigned long long*)ll, 1ull);
  atomicCAS((unsigned long long*)&ll[1], 0ull, 5ull);
  __threadfence();
  __threadfence_block();
  __nanosleep(100);
  if (i == 0) printf("n=%d w=%f\n", n, w);
}
