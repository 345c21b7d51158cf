// One m16n8k32 s8 tensor-core product per warp, written as inline PTX.
extern "C" __global__ void mma_s8(const int* a, const int* b, int* d) {
  int lane = threadIdx.x;
  int a0 = a[lane * 4 + 0], a1 = a[lane * 4 + 1], a2 = a[lane * 4 + 2], a3 = a[lane * 4 + 3];
  int b0 = b[lane * 2 + 0], b1 = b[lane * 2 + 1];
  int d0, d1, d2, d3;
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%10,%11,%12,%13};"
               : "=r"(d0), "=r"(d1), "=r"(d2), "=r"(d3)
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(0), "r"(0), "r"(0), "r"(0));
  d[lane * 4 + 0] = d0; d[lane * 4 + 1] = d1; d[lane * 4 + 2] = d2; d[lane * 4 + 3] = d3;
}
