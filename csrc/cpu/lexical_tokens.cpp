// The map of the lexical families' build, for one block of chunks: tokenise every chunk once, then
// (a) its "term" pairs: the unique tokens of "title\ntext" with 2+ characters outside the stopwords,
//     over a block vocabulary in order of first occurrence, and
// (b) its "title" pairs: the title names whose token sequence occurs in the chunk's text, plus the
//     chunk's own title.
// The Python map it replaces (contextrag/index/lexical/tokens.py) is the reference; the results are equal
// element for element (tested), so the reduce and the families are unchanged.
//
// Tokens are Python's: the maximal runs of `\w` characters of `text.lower()`, as `re.findall(r"\w+",
// text.lower())` finds them (bm25s's `\b\w\w+\b` keeps those of 2+ characters). Both halves come from
// CPython itself, so they agree for every code point, not only ASCII:
//   * `\w` is `Py_UNICODE_ISALNUM(c) || c == '_'`, the test `re` applies to a str pattern;
//   * `str.lower()` maps each code point by its simple lower-case mapping (`Py_UNICODE_TOLOWER`),
//     except U+0130 (lower-cases to two code points) and U+03A3 (final sigma depends on context). A
//     text holding either is lower-cased by `str.lower()` itself before it is tokenised.
// ASCII texts (most of any English corpus) take a byte-table path. Tokens are hashed as UTF-8.
//
// Title mentions: the names (already normalised: tokens joined by single spaces) form a trie over
// token ids; from each token of the chunk the walk follows the next tokens while a name continues.
// That finds exactly the names whose " name " occurs in " normalised text " (the Aho–Corasick matcher
// of the Python map), in time linear in the tokens times the longest name (max_n tokens).
//
// The heavy loop runs without the GIL, and a mapper is read-only during a call, so one mapper serves
// several threads at once.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;

namespace contextrag {
namespace {

// ---- character classes (from CPython's own Unicode database) -----------------------------------

struct CaseTable {
  std::vector<uint32_t> lower;   // BMP: simple lower-case mapping
  std::vector<uint8_t> word;     // BMP: 1 when the *lower-cased* code point is a \w character
  uint8_t ascii[128];            // ASCII: the lower-cased byte when it is \w, else 0

  CaseTable() : lower(0x10000), word(0x10000) {
    for (uint32_t c = 0; c < 0x10000; ++c) {
      uint32_t l = Py_UNICODE_TOLOWER(static_cast<Py_UCS4>(c));
      lower[c] = l;
      word[c] = is_word(l);
    }
    for (uint32_t c = 0; c < 128; ++c) ascii[c] = word[c] ? static_cast<uint8_t>(lower[c]) : 0;
  }
  static bool is_word(uint32_t c) { return c == '_' || Py_UNICODE_ISALNUM(static_cast<Py_UCS4>(c)); }
  uint32_t to_lower(uint32_t c) const {
    return c < 0x10000 ? lower[c] : static_cast<uint32_t>(Py_UNICODE_TOLOWER(static_cast<Py_UCS4>(c)));
  }
  bool word_of(uint32_t lc) const { return lc < 0x10000 ? word[lc] != 0 : is_word(lc); }
};

const CaseTable& case_table() {
  static const CaseTable t;   // thread-safe initialisation; built on first use, with the GIL held
  return t;
}

inline void put_utf8(std::string& b, uint32_t c) {
  if (c < 0x80) {
    b.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    b.push_back(static_cast<char>(0xC0 | (c >> 6)));
    b.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    b.push_back(static_cast<char>(0xE0 | (c >> 12)));
    b.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    b.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    b.push_back(static_cast<char>(0xF0 | (c >> 18)));
    b.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    b.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    b.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

// One text's code units, read in place from the str object (PEP 393 storage).
struct TextView {
  const void* data = nullptr;
  int64_t len = 0;
  int kind = 1;          // 1, 2 or 4 bytes per code point
  bool ascii = true;
  bool lowered = false;  // already lower-cased by str.lower() (holds U+0130 or U+03A3)
};

// Calls emit(utf8, bytes, chars) for every maximal \w run of the lower-cased text.
// The lower-cased code point of c when it is a \w character, else ~0u. ASCII (most characters even
// of a non-ASCII text) by the byte table; a lower-cased text holds no A-Z, so the table is exact there.
template <class CU>
inline uint32_t word_lower(CU c, bool lowered, const CaseTable& ct) {
  if (c < 128) return ct.ascii[c] ? ct.ascii[c] : ~0u;
  const uint32_t lc = lowered ? static_cast<uint32_t>(c) : ct.to_lower(c);
  return ct.word_of(lc) ? lc : ~0u;
}

template <class CU, class F>
void tokens_of(const CU* s, int64_t n, bool lowered, const CaseTable& ct, std::string& buf, F&& emit) {
  int64_t i = 0;
  while (i < n) {
    uint32_t lc = word_lower(s[i], lowered, ct);
    if (lc == ~0u) {
      ++i;
      continue;
    }
    buf.clear();
    uint32_t nch = 0;
    do {
      put_utf8(buf, lc);
      ++nch;
      if (++i >= n) break;
      lc = word_lower(s[i], lowered, ct);
    } while (lc != ~0u);
    emit(buf.data(), static_cast<uint32_t>(buf.size()), nch);
  }
}

template <class F>
void tokens_ascii(const uint8_t* s, int64_t n, const CaseTable& ct, std::string& buf, F&& emit) {
  int64_t i = 0;
  while (i < n) {
    uint8_t l = ct.ascii[s[i]];
    if (!l) {
      ++i;
      continue;
    }
    buf.clear();
    do {
      buf.push_back(static_cast<char>(l));
      if (++i >= n) break;
      l = ct.ascii[s[i]];
    } while (l);
    emit(buf.data(), static_cast<uint32_t>(buf.size()), static_cast<uint32_t>(buf.size()));
  }
}

template <class F>
void for_each_token(const TextView& t, const CaseTable& ct, std::string& buf, F&& emit) {
  if (t.ascii)
    tokens_ascii(static_cast<const uint8_t*>(t.data), t.len, ct, buf, emit);
  else if (t.kind == 1)
    tokens_of(static_cast<const uint8_t*>(t.data), t.len, t.lowered, ct, buf, emit);
  else if (t.kind == 2)
    tokens_of(static_cast<const uint16_t*>(t.data), t.len, t.lowered, ct, buf, emit);
  else
    tokens_of(static_cast<const uint32_t*>(t.data), t.len, t.lowered, ct, buf, emit);
}

// True when str.lower() of this text is not the per-code-point simple mapping.
template <class CU>
bool needs_full_lower(const CU* s, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (s[i] == 0x130 || s[i] == 0x3A3) return true;
  return false;
}

// A view of one str's code units (references kept in `keep`: the caller then releases the GIL). A
// text holding U+0130 or U+03A3 is lower-cased by str.lower() first (see the top of this file).
TextView view_of(py::handle h, const char* what, std::vector<py::object>& keep) {
  if (!PyUnicode_Check(h.ptr())) throw py::type_error(std::string(what) + " must hold str");
  py::object o = py::reinterpret_borrow<py::object>(h);
  bool lowered = false;
#if PY_VERSION_HEX < 0x030C0000
  if (PyUnicode_READY(o.ptr()) < 0) throw py::error_already_set();
#endif
  const int kind = static_cast<int>(PyUnicode_KIND(o.ptr()));
  if (kind != 1) {
    const void* d = PyUnicode_DATA(o.ptr());
    const int64_t len = PyUnicode_GET_LENGTH(o.ptr());
    const bool full = kind == 2 ? needs_full_lower(static_cast<const uint16_t*>(d), len)
                                : needs_full_lower(static_cast<const uint32_t*>(d), len);
    if (full) {
      o = o.attr("lower")();
      lowered = true;
    }
  }
  TextView v;
  v.data = PyUnicode_DATA(o.ptr());
  v.len = PyUnicode_GET_LENGTH(o.ptr());
  v.kind = static_cast<int>(PyUnicode_KIND(o.ptr()));
  v.ascii = PyUnicode_IS_ASCII(o.ptr());
  v.lowered = lowered;
  keep.push_back(std::move(o));
  return v;
}

// ---- a hash set of UTF-8 strings (open addressing; keys in one arena) --------------------------

inline uint64_t hash_bytes(const char* p, uint32_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(n) * 0xC2B2AE3D27D4EB4Full);
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
    p += 8;
    n -= 8;
  }
  if (n) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w) * 0xFF51AFD7ED558CCDull;
  }
  h ^= h >> 29;
  h *= 0xC4CEB9FE1A85EC53ull;
  h ^= h >> 32;
  return h;
}

// Each slot holds 32 bits of the key's hash beside its index, so a probe reads the entry only on a
// likely match, and an entry holds the key's first 8 bytes, so a key of up to 8 bytes (most tokens)
// is compared without reading the arena: the table of a block (about 50k tokens) does not fit in L2,
// and each of these reads is a cache miss (measured: 0.17 µs a lookup with three of them).
class StringTable {
 public:
  struct Entry {
    uint64_t head;            // the key's first 8 bytes, zero-padded
    uint32_t off, len;
    int32_t a = -1, b = -1;   // two values the user keeps with the key
  };

  StringTable() : slots_(1024, 0), mask_(1023) {}

  int32_t find(const char* p, uint32_t n) const { return probe(p, n, hash_bytes(p, n)).first; }

  // (index, inserted)
  std::pair<int32_t, bool> insert(const char* p, uint32_t n) { return insert(p, n, hash_bytes(p, n)); }
  std::pair<int32_t, bool> insert(const char* p, uint32_t n, uint64_t h) {
    auto r = probe(p, n, h);
    if (r.first >= 0) return {r.first, false};
    const int32_t id = static_cast<int32_t>(entries_.size());
    entries_.push_back({head_of(p, n), static_cast<uint32_t>(arena_.size()), n});
    arena_.insert(arena_.end(), p, p + n);
    slots_[r.second] = (h & 0xFFFFFFFF00000000ull) | static_cast<uint32_t>(id + 1);
    if (entries_.size() * 2 > slots_.size()) grow();
    return {id, true};
  }

  // Lookups are latency-bound: a caller that knows the next keys' hashes fetches their slots, then
  // (a few keys later, once the slot is in cache) their entries, ahead of use.
  void prefetch_slot(uint64_t h) const { __builtin_prefetch(&slots_[h & mask_]); }
  void prefetch_entry(uint64_t h) const {
    const uint64_t v = slots_[h & mask_];
    if (v != 0) __builtin_prefetch(&entries_[static_cast<uint32_t>(v) - 1]);
  }

  size_t size() const { return entries_.size(); }
  const char* key(int32_t id) const { return arena_.data() + entries_[id].off; }
  uint32_t key_len(int32_t id) const { return entries_[id].len; }
  Entry& entry(int32_t id) { return entries_[id]; }
  const Entry& entry(int32_t id) const { return entries_[id]; }

 private:
  // (index or -1, the slot where it is or would go)
  std::pair<int32_t, uint64_t> probe(const char* p, uint32_t n, uint64_t h) const {
    const uint64_t tag = h & 0xFFFFFFFF00000000ull;
    const uint64_t head = head_of(p, n);
    uint64_t s = h & mask_;
    for (;;) {
      const uint64_t v = slots_[s];
      if (v == 0) return {-1, s};
      if ((v & 0xFFFFFFFF00000000ull) == tag) {
        const int32_t id = static_cast<int32_t>(static_cast<uint32_t>(v)) - 1;
        const Entry& e = entries_[id];
        if (e.len == n && e.head == head && (n <= 8 || std::memcmp(arena_.data() + e.off + 8, p + 8, n - 8) == 0))
          return {id, s};
      }
      s = (s + 1) & mask_;
    }
  }
  void grow() {
    std::vector<uint64_t> s(slots_.size() * 2, 0);
    const uint64_t m = s.size() - 1;
    for (size_t id = 0; id < entries_.size(); ++id) {
      const uint64_t h = hash_bytes(arena_.data() + entries_[id].off, entries_[id].len);
      uint64_t k = h & m;
      while (s[k] != 0) k = (k + 1) & m;
      s[k] = (h & 0xFFFFFFFF00000000ull) | static_cast<uint32_t>(id + 1);
    }
    slots_.swap(s);
    mask_ = m;
  }

  static uint64_t head_of(const char* p, uint32_t n) {
    uint64_t w = 0;
    std::memcpy(&w, p, n < 8 ? n : 8);
    return w;
  }

  std::vector<Entry> entries_;
  std::vector<char> arena_;
  std::vector<uint64_t> slots_;
  uint64_t mask_;
};

// (node, token) -> child node, open addressing over 64-bit keys.
class EdgeTable {
 public:
  EdgeTable() : keys_(1024, kEmpty), vals_(1024, -1), mask_(1023) {}
  void set(int32_t node, int32_t tok, int32_t child) {
    if ((count_ + 1) * 2 > keys_.size()) grow();
    const uint64_t k = key(node, tok);
    uint64_t s = mix(k) & mask_;
    while (keys_[s] != kEmpty && keys_[s] != k) s = (s + 1) & mask_;
    if (keys_[s] == kEmpty) ++count_;
    keys_[s] = k;
    vals_[s] = child;
  }
  int32_t get(int32_t node, int32_t tok) const {
    const uint64_t k = key(node, tok);
    for (uint64_t s = mix(k) & mask_;; s = (s + 1) & mask_) {
      if (keys_[s] == k) return vals_[s];
      if (keys_[s] == kEmpty) return -1;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~0ull;
  static uint64_t key(int32_t node, int32_t tok) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(node)) << 32) | static_cast<uint32_t>(tok);
  }
  static uint64_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDull;
    k ^= k >> 33;
    return k;
  }
  void grow() {
    std::vector<uint64_t> k2(keys_.size() * 2, kEmpty);
    std::vector<int32_t> v2(keys_.size() * 2, -1);
    const uint64_t m = k2.size() - 1;
    for (size_t s = 0; s < keys_.size(); ++s) {
      if (keys_[s] == kEmpty) continue;
      uint64_t t = mix(keys_[s]) & m;
      while (k2[t] != kEmpty) t = (t + 1) & m;
      k2[t] = keys_[s];
      v2[t] = vals_[s];
    }
    keys_.swap(k2);
    vals_.swap(v2);
    mask_ = m;
  }
  std::vector<uint64_t> keys_;
  std::vector<int32_t> vals_;
  uint64_t mask_;
  size_t count_ = 0;
};

std::string utf8_of(const py::handle& s, const char* what) {
  if (!PyUnicode_Check(s.ptr())) throw py::type_error(std::string(what) + " must hold str");
  Py_ssize_t n = 0;
  const char* p = PyUnicode_AsUTF8AndSize(s.ptr(), &n);
  if (p == nullptr) throw py::error_already_set();
  return std::string(p, static_cast<size_t>(n));
}

// ---- the mapper ---------------------------------------------------------------------------------

class LexicalMapper {
 public:
  // stopwords: the tokens that are no "term"; names: the title names (normalised), or None; max_n:
  // names of more tokens are not matched (they only tag their own chunk).
  LexicalMapper(const py::iterable& stopwords, const py::object& names, int64_t max_n) : ct_(case_table()) {
    for (auto w : stopwords) {
      std::string s = utf8_of(w, "stopwords");
      stop_.insert(s.data(), static_cast<uint32_t>(s.size()));
    }
    if (max_n < 1) throw py::value_error("max_n must be >= 1");
    if (names.is_none()) return;
    has_names_ = true;
    int32_t col = 0;
    for (auto nm : names.cast<py::iterable>()) {
      std::string s = utf8_of(nm, "names");
      add_name(s, col++, max_n);
    }
    n_names_ = col;
  }

  int64_t n_names() const { return n_names_; }
  bool has_names() const { return has_names_; }

  // (term attributes, term rows, term cols, title rows, title cols); a family not asked for is None.
  py::tuple map_block(const py::list& titles, const py::list& texts, const py::object& own_cols_o, int64_t row0,
                      bool want_term, bool want_title) const {
    const int64_t n = static_cast<int64_t>(texts.size());
    if (want_term && static_cast<int64_t>(titles.size()) != n)
      throw py::value_error("titles and texts must have the same length");
    if (want_title && !has_names_) throw py::value_error("this mapper has no title names");
    std::vector<int64_t> own;
    if (want_title && !own_cols_o.is_none()) {
      auto oc = own_cols_o.cast<py::array_t<int64_t, py::array::c_style | py::array::forcecast>>();
      if (oc.ndim() != 1 || oc.shape(0) != n) throw py::value_error("own_cols must be (len(texts),)");
      own.assign(oc.data(), oc.data() + n);
      for (int64_t c : own)
        if (c >= n_names_) throw py::value_error("own_cols holds a column >= the number of names");
    }
    // Views of the texts (and titles), with references held: the heavy loop runs without the GIL.
    std::vector<py::object> keep;
    std::vector<TextView> tv(n), ttv(want_term ? n : 0);
    auto view = [&](py::handle h, const char* what) { return view_of(h, what, keep); };
    keep.reserve(2 * n);
    for (int64_t i = 0; i < n; ++i) tv[i] = view(texts[i], "texts");
    for (int64_t i = 0; i < static_cast<int64_t>(ttv.size()); ++i) ttv[i] = view(titles[i], "titles");

    // The block's tokens; per token, a = its column among the block's term attributes (or -1) and
    // b = its token id in the name trie (or -1), set when it first occurs.
    StringTable vocab;
    std::vector<int32_t> term_ids;            // term column -> vocab entry
    std::vector<int32_t> term_rows, term_cols, title_rows, title_cols;
    {
      py::gil_scoped_release nogil;
      std::string buf;
      std::vector<int32_t> stamp, row_cols, tids;
      auto intern = [&](const char* p, uint32_t len, uint32_t nch, uint64_t h) -> const StringTable::Entry& {
        auto r = vocab.insert(p, len, h);
        StringTable::Entry& e = vocab.entry(r.first);
        if (r.second) {
          if (want_term && nch >= 2 && stop_.find(p, len) < 0) {
            e.a = static_cast<int32_t>(term_ids.size());
            term_ids.push_back(r.first);
            stamp.push_back(-1);
          }
          if (has_names_) e.b = name_tokens_.find(p, len);
        }
        return e;
      };
      // A chunk's tokens (title's first) are collected with their hashes, then looked up in order
      // with the slots and entries of the tokens ahead prefetched.
      struct Ref {
        uint64_t h;
        uint32_t off, len, nch;
      };
      std::string bytes;
      std::vector<Ref> refs;
      auto collect = [&](const char* p, uint32_t len, uint32_t nch) {
        refs.push_back({hash_bytes(p, len), static_cast<uint32_t>(bytes.size()), len, nch});
        bytes.append(p, len);
      };
      constexpr size_t kSlotAhead = 16, kEntryAhead = 8;
      for (int64_t i = 0; i < n; ++i) {
        const int32_t row = static_cast<int32_t>(i);
        row_cols.clear();
        tids.clear();
        bytes.clear();
        refs.clear();
        if (want_term) for_each_token(ttv[i], ct_, buf, collect);
        const size_t n_title = refs.size();
        for_each_token(tv[i], ct_, buf, collect);
        const size_t L = refs.size();
        for (size_t k = 0; k < std::min(L, kSlotAhead); ++k) vocab.prefetch_slot(refs[k].h);
        for (size_t k = 0; k < L; ++k) {
          if (k + kSlotAhead < L) vocab.prefetch_slot(refs[k + kSlotAhead].h);
          if (k + kEntryAhead < L) vocab.prefetch_entry(refs[k + kEntryAhead].h);
          const Ref& r = refs[k];
          const StringTable::Entry& e = intern(bytes.data() + r.off, r.len, r.nch, r.h);
          if (want_term && e.a >= 0 && stamp[e.a] != row) {
            stamp[e.a] = row;
            row_cols.push_back(e.a);
          }
          if (want_title && k >= n_title) tids.push_back(e.b);
        }
        if (want_term) {
          std::sort(row_cols.begin(), row_cols.end());
          term_cols.insert(term_cols.end(), row_cols.begin(), row_cols.end());
          term_rows.insert(term_rows.end(), row_cols.size(), static_cast<int32_t>(row0 + i));
        }
        if (want_title) {
          row_cols.clear();
          if (!own.empty() && own[i] >= 0) row_cols.push_back(static_cast<int32_t>(own[i]));
          match(tids, row_cols);
          std::sort(row_cols.begin(), row_cols.end());
          row_cols.erase(std::unique(row_cols.begin(), row_cols.end()), row_cols.end());
          title_cols.insert(title_cols.end(), row_cols.begin(), row_cols.end());
          title_rows.insert(title_rows.end(), row_cols.size(), static_cast<int32_t>(row0 + i));
        }
      }
    }
    auto arr = [](const std::vector<int32_t>& v) {
      py::array_t<int32_t> a(static_cast<py::ssize_t>(v.size()));
      if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(int32_t));
      return a;
    };
    py::object attrs = py::none(), tr = py::none(), tc = py::none(), mr = py::none(), mc = py::none();
    if (want_term) {
      py::list l(term_ids.size());
      for (size_t j = 0; j < term_ids.size(); ++j) {
        PyObject* s = PyUnicode_DecodeUTF8(vocab.key(term_ids[j]), vocab.key_len(term_ids[j]), "strict");
        if (s == nullptr) throw py::error_already_set();
        PyList_SET_ITEM(l.ptr(), static_cast<Py_ssize_t>(j), s);
      }
      attrs = std::move(l);
      tr = arr(term_rows);
      tc = arr(term_cols);
    }
    if (want_title) {
      mr = arr(title_rows);
      mc = arr(title_cols);
    }
    return py::make_tuple(attrs, tr, tc, mr, mc);
  }

  // The tokens of one text (what re.findall(r"\w+", text.lower()) returns), for tests and queries.
  py::list tokens(const py::handle& text) const {
    std::vector<py::object> keep;
    const TextView v = view_of(text, "text", keep);
    py::list l;
    std::string buf;
    for_each_token(v, ct_, buf, [&](const char* p, uint32_t len, uint32_t) {
      PyObject* s = PyUnicode_DecodeUTF8(p, len, "strict");
      if (s == nullptr) throw py::error_already_set();
      l.append(py::reinterpret_steal<py::object>(s));
    });
    return l;
  }

  // The BM25 tokenisation of `texts` (bm25s.tokenize with this mapper's stopwords): (ids int32, one
  // per kept token, offsets int64 (len(texts) + 1,) where each text's ids start, the vocabulary in
  // order of first occurrence). Kept: tokens of `min_chars`+ characters outside the stopwords (1 with
  // no stopwords: every \w+ token, the word sequences the index stores for its updates).
  py::tuple token_ids(const py::list& texts, int64_t min_chars) const {
    if (min_chars < 1) throw py::value_error("min_chars must be >= 1");
    const int64_t n = static_cast<int64_t>(texts.size());
    std::vector<py::object> keep;
    keep.reserve(n);
    std::vector<TextView> tv(n);
    for (int64_t i = 0; i < n; ++i) tv[i] = view_of(texts[i], "texts", keep);
    StringTable vocab;
    std::vector<int32_t> ids, kept;       // kept: vocabulary index -> table entry
    std::vector<int64_t> offsets(n + 1, 0);
    {
      py::gil_scoped_release nogil;
      std::string buf;
      for (int64_t i = 0; i < n; ++i) {
        for_each_token(tv[i], ct_, buf, [&](const char* p, uint32_t len, uint32_t nch) {
          auto r = vocab.insert(p, len);
          StringTable::Entry& e = vocab.entry(r.first);
          if (r.second && static_cast<int64_t>(nch) >= min_chars && stop_.find(p, len) < 0) {
            e.a = static_cast<int32_t>(kept.size());
            kept.push_back(r.first);
          }
          if (e.a >= 0) ids.push_back(e.a);
        });
        offsets[i + 1] = static_cast<int64_t>(ids.size());
      }
    }
    py::array_t<int32_t> ia(static_cast<py::ssize_t>(ids.size()));
    if (!ids.empty()) std::memcpy(ia.mutable_data(), ids.data(), ids.size() * sizeof(int32_t));
    py::array_t<int64_t> oa(static_cast<py::ssize_t>(n + 1));
    std::memcpy(oa.mutable_data(), offsets.data(), (n + 1) * sizeof(int64_t));
    py::list words(kept.size());
    for (size_t j = 0; j < kept.size(); ++j) {
      PyObject* s = PyUnicode_DecodeUTF8(vocab.key(kept[j]), vocab.key_len(kept[j]), "strict");
      if (s == nullptr) throw py::error_already_set();
      PyList_SET_ITEM(words.ptr(), static_cast<Py_ssize_t>(j), s);
    }
    return py::make_tuple(ia, oa, words);
  }

 private:
  void add_name(const std::string& s, int32_t col, int64_t max_n) {
    // split on single spaces (names are normalised); longer than max_n tokens: not matchable
    std::vector<std::pair<size_t, size_t>> parts;
    size_t a = 0;
    for (size_t b = 0; b <= s.size(); ++b)
      if (b == s.size() || s[b] == ' ') {
        if (b > a) parts.emplace_back(a, b - a);
        a = b + 1;
      }
    if (parts.empty() || static_cast<int64_t>(parts.size()) > max_n) return;
    int32_t node = -1;
    for (auto& pr : parts) {
      const int32_t tid = name_tokens_.insert(s.data() + pr.first, static_cast<uint32_t>(pr.second)).first;
      if (tid >= static_cast<int32_t>(root_.size())) root_.resize(tid + 1, -1);
      int32_t next = node < 0 ? root_[tid] : edges_.get(node, tid);
      if (next < 0) {
        next = static_cast<int32_t>(name_of_node_.size());
        name_of_node_.push_back(-1);
        if (node < 0)
          root_[tid] = next;
        else
          edges_.set(node, tid, next);
      }
      node = next;
    }
    name_of_node_[node] = col;
  }

  // Appends the columns of the names that start at each token of `tids` (duplicates possible).
  void match(const std::vector<int32_t>& tids, std::vector<int32_t>& out) const {
    const size_t L = tids.size();
    for (size_t p = 0; p < L; ++p) {
      const int32_t t = tids[p];
      if (t < 0 || t >= static_cast<int32_t>(root_.size())) continue;
      int32_t node = root_[t];
      size_t q = p + 1;
      while (node >= 0) {
        if (name_of_node_[node] >= 0) out.push_back(name_of_node_[node]);
        if (q >= L || tids[q] < 0) break;
        node = edges_.get(node, tids[q++]);
      }
    }
  }

  const CaseTable& ct_;
  StringTable stop_;
  bool has_names_ = false;
  int64_t n_names_ = 0;
  StringTable name_tokens_;            // tokens of the names -> token id
  std::vector<int32_t> root_;          // token id -> first-level node (-1: no name starts with it)
  EdgeTable edges_;                    // deeper edges
  std::vector<int32_t> name_of_node_;  // node -> name column ending there, or -1
};

}  // namespace

void register_lexical(py::module_& m) {
  py::class_<LexicalMapper>(m, "LexicalMapper",
                            "The map of the lexical families' build for blocks of chunks: tokens, term pairs, "
                            "title mentions (csrc/cpu/lexical_tokens.cpp).")
      .def(py::init<const py::iterable&, const py::object&, int64_t>(), py::arg("stopwords"), py::arg("names"),
           py::arg("max_n"))
      .def_property_readonly("n_names", &LexicalMapper::n_names)
      .def_property_readonly("has_names", &LexicalMapper::has_names)
      .def("map_block", &LexicalMapper::map_block, py::arg("titles"), py::arg("texts"), py::arg("own_cols"),
           py::arg("row0"), py::arg("term"), py::arg("title"),
           "(term attributes, term rows, term cols, title rows, title cols) of one block; None for a family "
           "not asked for. Pairs are unique and sorted by row, then column.")
      .def("tokens", &LexicalMapper::tokens, py::arg("text"), "re.findall(r'\\w+', text.lower())")
      .def("token_ids", &LexicalMapper::token_ids, py::arg("texts"), py::arg("min_chars") = 2,
           "(ids, offsets, vocabulary) of the texts' tokens of min_chars+ characters outside the stopwords, "
           "ids in order of first occurrence: bm25s.tokenize(texts, stopwords=...) as flat arrays.");
}

}  // namespace contextrag
