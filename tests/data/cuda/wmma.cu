// A 16x16x16 half-precision wmma tile product (C = A B, A row-major, B column-major).
#include <mma.h>
using namespace nvcuda::wmma;
extern "C" __global__ void wmma_tile(const half* a, const half* b, float* c) {
  fragment<matrix_a, 16, 16, 16, half, row_major> fa;
  fragment<matrix_b, 16, 16, 16, half, col_major> fb;
  fragment<accumulator, 16, 16, 16, float> fc;
  fill_fragment(fc, 0.0f);
  load_matrix_sync(fa, a, 16);
  load_matrix_sync(fb, b, 16);
  mma_sync(fc, fa, fb, fc);
  store_matrix_sync(c, fc, 16, mem_row_major);
}
