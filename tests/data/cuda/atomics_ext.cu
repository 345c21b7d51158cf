// nvcc forms beyond the basics: half and bf16 atomics, cuda::atomic_ref orders, cooperative-group reductions, cuda::barrier / cuda::pipeline copies, SIMD intrinsics (read strictly: every line must be in the tables).
#include <cuda/barrier>
#include <cuda/pipeline>
#include <cuda/atomic>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cooperative_groups/memcpy_async.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
namespace cg = cooperative_groups;
extern "C" __global__ void e1(const float* in, float* out, int n) {
  __shared__ float s[256];
  __shared__ cuda::barrier<cuda::thread_scope_block> bar;
  auto block = cg::this_thread_block();
  if (block.thread_rank() == 0) init(&bar, block.size());
  block.sync();
  cuda::memcpy_async(block, s, in + blockIdx.x * 256, sizeof(float) * 256, bar);
  bar.arrive_and_wait();
  auto warp = cg::tiled_partition<32>(block);
  float v = cg::reduce(warp, s[threadIdx.x], cg::plus<float>());
  int m = cg::reduce(warp, (int)threadIdx.x, cg::greater<int>());
  if (warp.thread_rank() == 0) out[blockIdx.x * 8 + warp.meta_group_rank()] = v + m;
}
extern "C" __global__ void e2(__half2* h, __nv_bfloat162* b, __nv_bfloat16* b1, float* f, unsigned long long* u, int* i) {
  atomicAdd(h, __halves2half2(__float2half(1.0f), __float2half(2.0f)));
  atomicAdd(b, __floats2bfloat162_rn(1.0f, 2.0f));
  atomicAdd(b1, __float2bfloat16(3.0f));
  cuda::atomic_ref<float, cuda::thread_scope_device> af(f[0]);
  af.fetch_add(1.0f, cuda::memory_order_relaxed);
  cuda::atomic_ref<int, cuda::thread_scope_system> ai(i[0]);
  ai.fetch_max(5, cuda::memory_order_acq_rel);
  atomicCAS(u, 1ull, 2ull);
  atomicExch(f + 1, 4.0f);
  atomicInc((unsigned*)i + 1, 17u);
  i[2] = __reduce_max_sync(0xffffffffu, i[3]);
  __nv_fp8_e4m3 q(f[2]);
  f[3] = float(q);
  __half2 x = __hfma2(h[1], h[2], h[3]);
  h[4] = __hmax2(x, __habs2(h[5]));
  f[4] = __fdividef(f[5], f[6]) + __saturatef(f[7]) + __frsqrt_rn(f[8]) + rsqrtf(f[9]) + __expf(f[10]);
  u[1] = __funnelshift_l(i[4], i[5], i[6]) + __byte_perm(i[7], i[8], 0x3210) + __brevll(u[2]) + __ffsll(u[3]) + __clzll(u[4]);
  u[2] = __umul64hi(u[5], u[6]) + __mul64hi(u[7], u[8]) + __sad(i[9], i[10], 3u) + __vabsdiffu4(i[11], i[12]) + __vadd2(i[13], i[14]);
}
extern "C" __global__ void e3(const float4* in, float4* out, int n) {
  cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();
  __shared__ float4 s[128];
  pipe.producer_acquire();
  cuda::memcpy_async(&s[threadIdx.x], &in[threadIdx.x], sizeof(float4), pipe);
  pipe.producer_commit();
  pipe.consumer_wait();
  out[threadIdx.x] = s[threadIdx.x];
  pipe.consumer_release();
  __nanosleep(100);
  long long c = clock64();
  if (c == 0) __trap();
  unsigned sm; asm("mov.u32 %0, %%smid;" : "=r"(sm));
  out[0].x += sm + __activemask();
}
