// Warp sums with shfl.down and a butterfly max with shfl.xor.
extern "C" __global__ void warp_reduce(const int* x, int* sums, int* maxes) {
  int v = x[blockIdx.x * blockDim.x + threadIdx.x], m = v;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
  for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffff, m, o));
  int w = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  if ((threadIdx.x & 31) == 0) { sums[w] = v; maxes[w] = m; }
}
