// AMX-BF16 tile products for the bf16 GEMMs of gemm_bf16.cpp (same packed operands, see there).
#pragma once
#include <cstddef>
#include <cstdint>

namespace contextrag {

// Rows per AMX block: two 16-row tiles of A against two 16-column tiles of B, four accumulators.
constexpr ptrdiff_t AMX_ROWS = 32;
// Pairs of k per tile step: a 16 × 64-byte A tile holds 32 bf16 of each row.
constexpr ptrdiff_t AMX_PAIRS = 16;

// One thread's hold on the AMX tiles: configures the tiles on construction, releases them on destruction
// (the tile state is per thread, and other libraries in the process, oneDNN among them, load their own).
struct AmxTiles {
  AmxTiles();
  ~AmxTiles();
  AmxTiles(const AmxTiles&) = delete;
  AmxTiles& operator=(const AmxTiles&) = delete;
};

// G (AMX_ROWS, Np), row stride ldg floats = A (AMX_ROWS rows, stride lda uint32) · Bp (K2r, Np), the raw
// fp32 dot products. K2r is a multiple of AMX_PAIRS and every pair of A and Bp read is valid: the
// caller pads both with zeros (gemm_bf16.cpp: amx_padded_b, amx_block_rows). Np is a multiple of 16.
// next (row stride ldn, AMX_ROWS rows of at least K2r pairs; or nullptr): the block to prefetch.
void amx_dots(const uint32_t* A, ptrdiff_t lda, const uint32_t* Bp, ptrdiff_t Np, ptrdiff_t K2r, float* G,
              ptrdiff_t ldg, const uint32_t* next, ptrdiff_t ldn);

inline ptrdiff_t amx_pairs_padded(ptrdiff_t K2) { return (K2 + AMX_PAIRS - 1) / AMX_PAIRS * AMX_PAIRS; }

}  // namespace contextrag
