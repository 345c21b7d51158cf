// Device functions that take and return aggregates by value (noinline): nvcc passes them as .param byte arrays.
struct Affine { float scale, shift; int bias; };
__device__ __noinline__ float apply(Affine t, float4 v) { return t.scale * v.x + t.shift * v.w + t.bias; }
__device__ __noinline__ float4 spread(float a) { return make_float4(a, a + 1, a + 2, a + 3); }
extern "C" __global__ void structs(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { Affine t{in[i], 2.0f, i}; out[i] = apply(t, spread(in[i])); }
}
