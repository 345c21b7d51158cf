// Cooperative-groups grid synchronization (acquire/release atomics: read with strict=False).
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void grid_sync(int* x) {
  x[blockIdx.x] = blockIdx.x;
  cg::this_grid().sync();
  if (blockIdx.x == 0 && threadIdx.x == 0) x[gridDim.x] = 1;
}
