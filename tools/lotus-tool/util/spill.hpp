// lotus — lotus-tool: bounded-memory sequences (append in RAM, spill to an unlinked temp file)
// SPDX-License-Identifier: MIT
//
// The commands that need every record of a kind again after the first pass (stats: exact
// quantiles, batch epochs and the delay join; viz: batch epochs) keep them in a spill_log: a
// fixed RAM buffer that, once full, is appended to an anonymous temporary file. Peak memory is
// then a constant (a few buffers) however large the trace is; the data itself lives in the page
// cache or on disk, like `sort(1)`'s temporary files.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <queue>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace lotus_tool {

/// Where temporary files go: $TMPDIR when set and non-empty, else /tmp.
std::string temp_dir();

/// An anonymous temporary file (O_TMPFILE, or mkstemp + unlink): gone when closed, never seen
/// by other processes. Throws tool_error(exit_io) when it cannot be created, written or read.
class temp_file {
 public:
  temp_file();
  ~temp_file();
  temp_file(const temp_file&) = delete;
  temp_file& operator=(const temp_file&) = delete;

  void append(const void* data, std::size_t bytes);
  /// Reads exactly `bytes` at `offset` (which must lie within what was appended).
  void read_at(std::uint64_t offset, void* data, std::size_t bytes) const;
  std::uint64_t size() const noexcept { return size_; }

 private:
  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::string dir_;
};

/// Asks the kernel to back [p, p + bytes) with transparent huge pages where it can (a hint:
/// nothing happens where they are off or unsupported).
void advise_huge_pages(void* p, std::size_t bytes) noexcept;

/// Default RAM per spill_log buffer.
inline constexpr std::size_t k_spill_buffer_bytes = std::size_t{1} << 20;

/// Append-only sequence of trivially copyable T with bounded RAM. Scans see the items in
/// append order.
template <class T>
class spill_log {
  static_assert(std::is_trivially_copyable_v<T>, "spill_log stores raw bytes");

 public:
  explicit spill_log(std::size_t buffer_bytes = k_spill_buffer_bytes)
      : cap_(std::max<std::size_t>(1, buffer_bytes / sizeof(T))) {}

  void push(const T& v) {
    if (buf_.size() == cap_) spill();
    buf_.push_back(v);
  }
  std::uint64_t size() const noexcept { return spilled_ + buf_.size(); }
  bool empty() const noexcept { return size() == 0; }
  bool spilled() const noexcept { return spilled_ != 0; }
  std::size_t buffer_items() const noexcept { return cap_; }
  /// Empties the log, keeping its RAM buffer (no new allocation for the next use).
  void clear() {
    buf_.clear();
    file_.reset();
    spilled_ = 0;
  }
  /// Allocates the RAM buffer now (pages are touched only as items arrive): no reallocation
  /// while it fills. On Linux the buffer is marked for transparent huge pages: filling a few
  /// MiB then takes a few page faults instead of one per 4 KiB.
  void reserve() {
    buf_.reserve(cap_);
    advise_huge_pages(buf_.data(), cap_ * sizeof(T));
  }
  /// The items, when all are in RAM (never spilled): callers may reorder them in place.
  std::vector<T>* in_ram() noexcept { return spilled_ == 0 ? &buf_ : nullptr; }

  /// Calls f(const T* items, std::size_t n) for consecutive blocks, in append order.
  template <class F>
  void scan_blocks(F&& f) const {
    if (spilled_ != 0) {
      std::vector<T> block(std::min<std::uint64_t>(cap_, spilled_));
      for (std::uint64_t at = 0; at < spilled_;) {
        const auto n =
            static_cast<std::size_t>(std::min<std::uint64_t>(block.size(), spilled_ - at));
        file_->read_at(at * sizeof(T), block.data(), n * sizeof(T));
        f(static_cast<const T*>(block.data()), n);
        at += n;
      }
    }
    if (!buf_.empty()) f(static_cast<const T*>(buf_.data()), buf_.size());
  }

  /// Pull-style cursor over the items in append order (one buffer of RAM while spilled).
  class reader {
   public:
    explicit reader(const spill_log& log) : log_(&log) {}
    bool next(T& out) {
      if (pos_ == n_ && !refill()) return false;
      out = data_[pos_++];
      return true;
    }

   private:
    bool refill() {
      const spill_log& l = *log_;
      if (at_ < l.spilled_) {
        const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(l.cap_, l.spilled_ - at_));
        block_.resize(n);
        l.file_->read_at(at_ * sizeof(T), block_.data(), n * sizeof(T));
        at_ += n;
        data_ = block_.data();
        n_ = n;
      } else if (!tail_done_) {
        tail_done_ = true;
        data_ = l.buf_.data();
        n_ = l.buf_.size();
      } else {
        return false;
      }
      pos_ = 0;
      return n_ != 0;
    }
    const spill_log* log_;
    std::vector<T> block_;
    const T* data_ = nullptr;
    std::size_t pos_ = 0, n_ = 0;
    std::uint64_t at_ = 0;
    bool tail_done_ = false;
  };

  /// Calls f(const T&) for every item, in append order.
  template <class F>
  void scan(F&& f) const {
    scan_blocks([&](const T* p, std::size_t n) {
      for (std::size_t i = 0; i < n; ++i) f(p[i]);
    });
  }

 private:
  void spill() {
    if (!file_) file_ = std::make_unique<temp_file>();
    file_->append(buf_.data(), buf_.size() * sizeof(T));
    spilled_ += buf_.size();
    buf_.clear();
  }

  std::size_t cap_;
  std::vector<T> buf_;
  std::unique_ptr<temp_file> file_;
  std::uint64_t spilled_ = 0;
};

/// Calls out(const T&) for every item of `in` in `less` order (not stable), in bounded memory:
/// in RAM when `in` never spilled, else an external merge sort (sorted runs of one buffer each
/// in a temp file, then one k-way merge).
template <class T, class Less, class Out>
void sorted_scan(const spill_log<T>& in, Less less, Out&& out) {
  if (!in.spilled()) {
    std::vector<T> v;
    v.reserve(static_cast<std::size_t>(in.size()));
    in.scan_blocks([&](const T* p, std::size_t n) { v.insert(v.end(), p, p + n); });
    std::sort(v.begin(), v.end(), less);
    for (const T& x : v) out(x);
    return;
  }
  // Runs: each block of the log (one buffer's worth) sorted and written back to back.
  temp_file runs;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> run_at;  // (first item, items)
  {
    std::vector<T> v;
    in.scan_blocks([&](const T* p, std::size_t n) {
      v.assign(p, p + n);
      std::sort(v.begin(), v.end(), less);
      run_at.emplace_back(runs.size() / sizeof(T), n);
      runs.append(v.data(), n * sizeof(T));
    });
  }
  // Merge: one read buffer per run, splitting one log buffer's worth of RAM (at least 256 items
  // each, so that reads stay large when there are very many runs).
  const std::size_t per_run =
      std::max<std::size_t>(256, in.buffer_items() / std::max<std::size_t>(1, run_at.size()));
  struct cursor {
    std::vector<T> buf;
    std::size_t pos = 0;
    std::uint64_t next = 0, left = 0;  // file position (items) and items not yet read
  };
  std::vector<cursor> cur(run_at.size());
  auto refill = [&](cursor& c) {
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(per_run, c.left));
    c.buf.resize(n);
    if (n != 0) runs.read_at(c.next * sizeof(T), c.buf.data(), n * sizeof(T));
    c.next += n;
    c.left -= n;
    c.pos = 0;
    return n != 0;
  };
  auto heap_less = [&](std::size_t a, std::size_t b) {
    return less(cur[b].buf[cur[b].pos], cur[a].buf[cur[a].pos]);  // min-heap
  };
  std::priority_queue<std::size_t, std::vector<std::size_t>, decltype(heap_less)> heap(heap_less);
  for (std::size_t i = 0; i < cur.size(); ++i) {
    cur[i].next = run_at[i].first;
    cur[i].left = run_at[i].second;
    if (refill(cur[i])) heap.push(i);
  }
  while (!heap.empty()) {
    const std::size_t i = heap.top();
    heap.pop();
    cursor& c = cur[i];
    out(c.buf[c.pos]);
    if (++c.pos < c.buf.size() || refill(c)) heap.push(i);
  }
}

/// Epochs of batch records, the one rule every command uses: batch indices restart at 0 in every
/// epoch, so among the records of one group (a batch kind in one trace directory) with the same
/// index, the k-th by start time is epoch k. key(x) gives (group, idx, start); out(x, epoch) is
/// called for every item in (group, idx, start) order, in bounded memory (sorted_scan).
template <class T, class Key, class Out>
void scan_epochs(const spill_log<T>& in, Key key, Out&& out) {
  bool first = true;
  std::uint64_t prev_group = 0, prev_idx = 0, epoch = 0;
  sorted_scan(
      in, [&key](const T& a, const T& b) { return key(a) < key(b); },
      [&](const T& x) {
        const auto [group, idx, start] = key(x);
        static_cast<void>(start);
        epoch = (!first && group == prev_group && idx == prev_idx) ? epoch + 1 : 0;
        first = false;
        prev_group = group;
        prev_idx = idx;
        out(x, epoch);
      });
}

}  // namespace lotus_tool
