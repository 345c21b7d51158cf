// Device functions that stay calls (noinline): a call sequence with arguments and a return value.
__device__ __noinline__ float axpb(float a, float x, float b) { return a * x + b; }
__device__ __noinline__ int twice(int v) { return 2 * v; }
extern "C" __global__ void calls(const float* x, float* y, int* k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i] = axpb(2.0f, x[i], 1.0f);
  k[i] = twice(i);
}
