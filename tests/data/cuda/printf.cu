// printf from a kernel: nvcc packs the arguments into a local buffer and calls vprintf.
#include <cstdio>
extern "C" __global__ void say(const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && i % 50 == 0)
    printf("thread %d of %d: x=%.3f hex=%#x wide=%lld c=%c s=%s\n", i, n, x[i], i * 3, (long long)i << 40,
           'A' + (i % 26), "ok");
}
