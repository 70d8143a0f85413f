// plain_array<T>(shape): a new C-contiguous numpy array whose memory comes from aligned_alloc rather
// than numpy's allocator, for large outputs (the transpose, packed bf16 operands). numpy asks for
// transparent huge pages (MADV_HUGEPAGE) on arrays of 4 MB and more, and where the kernel compacts
// memory on such faults (defrag=madvise, a common default) the first touch of a fresh array waits on
// compaction whenever memory is fragmented; ordinary 4 KB pages cost a steady few µs each (the k-means
// benchmark times both for its work buffers: "ours_bounded_hugepages"). The array owns the block
// through a capsule.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdlib>
#include <new>
#include <vector>

namespace contextrag {

template <class T>
pybind11::array_t<T> plain_array(const std::vector<ptrdiff_t>& shape) {
  size_t count = 1;
  for (ptrdiff_t s : shape) count *= (size_t)s;
  const size_t bytes = count * sizeof(T);
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);   // a multiple of the alignment, never 0
  if (!p) throw std::bad_alloc();
  pybind11::capsule owner(p, [](void* q) { std::free(q); });
  return pybind11::array_t<T>(shape, static_cast<T*>(p), owner);
}

}  // namespace contextrag
