// AMX-BF16 tile products (Sapphire Rapids and later) behind the bf16 GEMMs of gemm_bf16.cpp: the
// k-means assignment's distance tiles and the bounded loop's re-evaluations. One TDPBF16PS multiplies
// a 16 × 32 bf16 tile of A by a 32 × 16 tile of B into 16 × 16 fp32 sums, about eight times the
// vdpbf16ps rate of the same core; the operands are the ones gemm_bf16.cpp already packs (A: rows of
// k-pairs; Bp: k-pairs × columns, pair-interleaved, which is AMX's B layout), so the error bounds built
// on those roundings hold unchanged: inputs rounded to bf16 once, products exact in fp32, sums fp32,
// denormal inputs read as zero (as vdpbf16ps).
//
// Linux hands the tile state to a process only on request (arch_prctl ARCH_REQ_XCOMP_PERM); without it
// the first tile instruction faults, so amx_supported() asks once and says no if refused.
#include <cstdint>
#include <cstring>

// AMX intrinsics need GCC 11 or clang 12; an older compiler builds the module without them
#if defined(__x86_64__) && ((defined(__clang__) && __clang_major__ >= 12) || \
                            (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 11))
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define CR_AMX_X86 1
#endif

#include "gemm_amx.h"
#include "isa.h"

namespace contextrag {

#if defined(CR_AMX_X86)
namespace {

constexpr int ARCH_REQ_XCOMP_PERM = 0x1023;
constexpr int XFEATURE_XTILEDATA = 18;

bool probe_amx() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool tile = (d >> 24) & 1u, bf16 = (d >> 22) & 1u, avx512f = (b >> 16) & 1u;
  if (!(tile && bf16 && avx512f)) return false;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1u)) return false;   // OSXSAVE
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & (3u << 17)) != (3u << 17)) return false;   // XTILECFG and XTILEDATA enabled by the OS
  return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

// The tile configuration: palette 1, eight 16-row × 64-byte tiles (0-3 accumulators, 4-5 A, 6-7 B).
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
  TileConfig() {
    for (int t = 0; t < 8; ++t) {
      colsb[t] = 64;
      rows[t] = 16;
    }
  }
};

}  // namespace

bool amx_supported() {
  static const bool ok = probe_amx();
  return ok;
}

#pragma GCC push_options
#pragma GCC target("amx-tile,amx-bf16,avx512f")

namespace {
__attribute__((target("amx-tile"))) void tiles_configure() {
  static const TileConfig cfg;
  _tile_loadconfig(&cfg);
}
__attribute__((target("amx-tile"))) void tiles_release() { _tile_release(); }
}  // namespace

AmxTiles::AmxTiles() { tiles_configure(); }

AmxTiles::~AmxTiles() { tiles_release(); }

void amx_dots(const uint32_t* A, ptrdiff_t lda, const uint32_t* Bp, ptrdiff_t Np, ptrdiff_t K2r, float* G,
              ptrdiff_t ldg, const uint32_t* next, ptrdiff_t ldn) {
  const ptrdiff_t nct = Np / 16, sa = lda * 4, sb = Np * 4, sg = ldg * 4;
  const uint32_t* A1 = A + 16 * lda;
  float* G1 = G + 16 * ldg;
  ptrdiff_t c = 0;
  for (; c + 2 <= nct; c += 2) {   // two column tiles: 4 accumulators, each A and B tile used twice
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    const uint32_t* B = Bp + c * 16;
    for (ptrdiff_t p = 0; p < K2r; p += AMX_PAIRS) {
      // the next block's rows, a line per row per step, while this one computes: a tile load that
      // misses the cache waits on memory row by row (measured: streaming A ran at a third of the
      // cached rate without this)
      if (next && c == 0)
        for (int r = 0; r < AMX_ROWS; ++r) _mm_prefetch((const char*)(next + r * ldn + p), _MM_HINT_T0);
      _tile_loadd(4, A + p, sa);
      _tile_loadd(5, A1 + p, sa);
      _tile_loadd(6, B + p * Np, sb);
      _tile_loadd(7, B + p * Np + 16, sb);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, G + c * 16, sg);
    _tile_stored(1, G + c * 16 + 16, sg);
    _tile_stored(2, G1 + c * 16, sg);
    _tile_stored(3, G1 + c * 16 + 16, sg);
  }
  if (c < nct) {   // an odd last column tile
    _tile_zero(0);
    _tile_zero(2);
    const uint32_t* B = Bp + c * 16;
    for (ptrdiff_t p = 0; p < K2r; p += AMX_PAIRS) {
      _tile_loadd(4, A + p, sa);
      _tile_loadd(5, A1 + p, sa);
      _tile_loadd(6, B + p * Np, sb);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(2, 5, 6);
    }
    _tile_stored(0, G + c * 16, sg);
    _tile_stored(2, G1 + c * 16, sg);
  }
}

#pragma GCC pop_options

#else   // not x86-64: no AMX

bool amx_supported() { return false; }
AmxTiles::AmxTiles() {}
AmxTiles::~AmxTiles() {}
void amx_dots(const uint32_t*, ptrdiff_t, const uint32_t*, ptrdiff_t, ptrdiff_t, float*, ptrdiff_t, const uint32_t*,
              ptrdiff_t) {}

#endif

bool amx_active() { return amx_allowed() && amx_supported(); }

}  // namespace contextrag
