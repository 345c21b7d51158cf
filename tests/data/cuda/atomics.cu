// A histogram with atomicAdd, a global max with atomicMax and a first-claim with atomicCAS.
extern "C" __global__ void atomics(const unsigned* x, unsigned* hist, int* best, int* owner, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned v = x[i];
  atomicAdd(&hist[v % 16], 1u);
  atomicMax(best, (int)v);
  atomicCAS(&owner[v % 16], -1, i);
}
