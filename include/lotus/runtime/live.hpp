// lotus — live aggregates of a running process (internal)
// SPDX-License-Identifier: MIT
// Counters and histograms kept by the writer thread, published in place in a small `.lotus-live_`
// file beside the sidecar (tools/docs/FORMAT.md §9); `lotus-tool top` and `serve` read it.
#pragma once

#include <errno.h>   // errno, EINTR
#include <string.h>  // strnlen
#include <time.h>    // CLOCK_REALTIME
#include <unistd.h>  // pwrite, close, getpid, getppid

#include <cstdint>      // uint64_t
#include <cstring>      // memcpy, memcmp
#include <string_view>  // string_view

#include "lotus/config.hpp"
#include "lotus/detail/clock.hpp"
#include "lotus/detail/inflight.hpp"
#include "lotus/detail/record_name.hpp"
#include "lotus/options.hpp"
#include "lotus/record_site.hpp"
#include "lotus/runtime/diagnostics.hpp"
#include "lotus/runtime/env.hpp"
#include "lotus/runtime/intern.hpp"
#include "lotus/runtime/loader_kind.hpp"
#include "lotus/runtime/text.hpp"
#include "lotus/runtime/trace_files.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// Distinct op names one process keeps figures for; records of further names are counted
/// (`overflow`), not lost from the trace.
constexpr std::size_t live_max_ops = 64;
/// Worker threads (threads that write SBatchPreprocessed) one process keeps figures for.
constexpr std::size_t live_max_workers = 64;
/// Threads whose SBatchWait records one process keeps apart (`wait_thread` lines: the training
/// loop's and any helper thread's that fetches batches for it); further threads: in `wait` only.
constexpr std::size_t live_max_wait_threads = 8;
/// Longest op name kept (bytes, without the leading S); a longer name is counted as overflow.
constexpr std::size_t live_max_name = 96;
/// Record sites remembered (several sites may share one op name); further sites: overflow.
constexpr std::size_t live_max_sites = 512;
/// `inflight` lines one live file shows (a batch, a wait and the innermost op per thread).
constexpr std::size_t live_max_inflight = 192;
/// Size of the live file: written once at creation (counted once against LOTUS_MAX_BYTES), then
/// rewritten in place.
constexpr std::size_t live_file_bytes = 32768;
/// The live file is rewritten at most this often (and at every flush and at exit).
constexpr std::uint64_t live_publish_ns = 250000000;
/// The recent window (input-wait share, rates, busy shares): the last 10 s, in 1 s steps.
constexpr unsigned live_window_steps = 10;
/// Histogram bucket upper bounds (ns), Prometheus style (1, 2.5, 5 per decade), then +Inf.
inline constexpr std::uint64_t live_bounds_ns[] = {
    10000,     25000,      50000,      100000,     250000,     500000,    1000000,
    2500000,   5000000,    10000000,   25000000,   50000000,   100000000, 250000000,
    500000000, 1000000000, 2500000000, 5000000000, 10000000000};
constexpr unsigned live_bounds = sizeof live_bounds_ns / sizeof live_bounds_ns[0];
constexpr unsigned live_buckets = live_bounds + 1;  // the last one: +Inf

/// Counts per bucket (not cumulative), the count and the sum.
struct live_hist {
  std::uint64_t count = 0, sum_ns = 0;
  std::uint64_t bucket[live_buckets] = {};
};

/// The live figures of one process. Writer thread only (observe, publish, after_fork).
class live_state {
 public:
  live_state() noexcept {
    // first_bucket_[b]: buckets whose bound is below every duration of bit length b.
    for (unsigned b = 0; b <= 64; ++b) {
      const std::uint64_t least = b == 0 ? 0 : std::uint64_t{1} << (b - 1);
      unsigned i = 0;
      while (i < live_bounds && live_bounds_ns[i] < least) ++i;
      first_bucket_[b] = static_cast<std::uint8_t>(i);
    }
    for (unsigned i = 0; i < live_buckets; ++i) {
      bound_or_max_[i] = i < live_bounds ? live_bounds_ns[i] : ~std::uint64_t{0};
    }
    reset();
  }

  /// One formatted record: `n` its label ("S" + name), `start`/`dur` as written, `tid` its thread.
  /// The per-record cost: a cached site lookup, a bucket found in at most three compares.
  void observe(const label_table::label& n, std::uint64_t start, std::uint64_t dur,
               std::uint64_t tid) noexcept {
    if (LOTUS_DETAIL_UNLIKELY(!on_)) return;
    site* s = &sites_[slot_of(n.key)];  // the common case: the site in its home slot
    if (LOTUS_DETAIL_UNLIKELY(s->key != n.key)) s = find_site(n);
    switch (s->kind) {
      case kind_op: {
        add(ops_[s->op].hist, dur);
        return;
      }
      case kind_wait:
        role_main_ = true;
        add(wait_, dur);
        wait_thread(tid, dur);
        return;
      case kind_consumed:
        role_main_ = true;
        ++consumed_;
        return;
      case kind_batch:
        worker_batch(tid, start, dur);
        return;
      case kind_overflow:
        ++overflow_;
        return;
      default:
        return;
    }
  }

  /// What the threads are inside now (the writer's scan, once per cycle): the `inflight` lines,
  /// and each worker's busy time counts its batch in progress (a stuck worker's share rises).
  void set_inflight(const inflight_entry* e, std::size_t n, std::uint64_t now) noexcept {
    if (!on_) return;
    for (std::size_t k = 0; k < worker_count_; ++k) workers_[k].inflight_ns = 0;
    shown_count_ = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (e[i].what == inflight_entry::op && !e[i].innermost) continue;
      if (shown_count_ < live_max_inflight) shown_[shown_count_++] = e[i];
      if (e[i].what != inflight_entry::batch) continue;
      worker_entry* w = nullptr;
      for (std::size_t k = 0; k < worker_count_ && w == nullptr; ++k) {
        if (workers_[k].tid == e[i].tid) w = &workers_[k];
      }
      if (w == nullptr && worker_count_ < live_max_workers) {  // stuck in its first batch
        w = &workers_[worker_count_++];
        *w = worker_entry{e[i].tid, 0, 0, 0, 0};
      }
      if (w != nullptr) w->inflight_ns = e[i].since_ns < now ? e[i].since_ns : now;
    }
  }

  /// LOTUS_LIVE changed (options::live, applied at a writer cycle). Off: a file already written
  /// gets this process's final figures, then nothing is observed or written. On again: the
  /// figures go on from where they stopped, in the same file (no counter goes back).
  LOTUS_DETAIL_COLD void set_on(bool on, trace_files& files, trace_stats (*stats)(),
                                const text& info) noexcept {
    if (on == on_) return;
    if (!on && file_.fd >= 0) publish(files, stats, info, true, true);
    on_ = on;
  }

  /// In a forked child: the parent's figures and file are not this process's.
  LOTUS_DETAIL_COLD void after_fork() noexcept {
    trace_files::close_live(file_);
    failed_ = false;
    mine_count_ = 0;  // the parent's
    reset();
  }

  /// Rewrites the live file when due (every live_publish_ns; at once when `force`: a flush, the
  /// exit). `final`: the process's last figures. Creates the file on first use and again after
  /// the prefix changed; nothing when tracing to files is off.
  LOTUS_DETAIL_COLD void publish(trace_files& files, trace_stats (*stats)(), const text& info,
                                 bool force, bool final) noexcept {
    if (!on_) return;
    const std::uint64_t now = clock_ns(CLOCK_REALTIME);
    if (!force && !final && now - published_at_ < live_publish_ns) return;
    if (files.disabled()) return;
    // No record yet and nothing in progress: no file (as the sidecar).
    if (site_count_ == 0 && shown_count_ == 0 && file_.fd < 0) return;
    step(now);
    const std::string_view where = files.live_key();
    if (where.size() != where_.size() ||
        std::memcmp(where.data(), where_.c_str(), where.size()) != 0) {
      trace_files::close_live(file_);
      failed_ = false;
      where_.clear();
      where_.add(where.data(), where.size());
    }
    published_at_ = now;
    if (file_.fd < 0 && !failed_) {
      failed_ = !files.create_live(file_, live_file_bytes, mine_, mine_count_);
      if (!failed_) {
        continue_generation();
        remember(file_);
      }
    }
    if (failed_) return;
    if (!files.live_ours(file_)) {
      failed_ = true;  // removed or replaced: not written again (until the next prefix)
      diag(topic::live,
           "the live figures file was removed or replaced; lotus-tool top and serve no longer see "
           "this process");
      return;
    }
    const trace_stats st = stats != nullptr ? stats() : trace_stats{};
    format_body(now, st, info, final);
    // Seqlock: an odd generation while the body changes; readers check it before and after.
    write_header(++gen_);
    pwrite_all(header_bytes, buf_ + header_bytes, used_ - header_bytes);
    write_header(++gen_);
  }

  /// The histogram bucket of a duration (tests and bench check it against a plain search).
  unsigned bucket(std::uint64_t dur) const noexcept { return bucket_of(dur); }

 private:
  enum : std::uint8_t {
    kind_new,
    kind_op,
    kind_wait,
    kind_consumed,
    kind_batch,
    kind_other,
    kind_overflow
  };
  struct site {
    const record_site* key;
    std::uint8_t kind;
    std::uint16_t op;
  };
  struct op_entry {
    char name[live_max_name];
    std::size_t size;
    live_hist hist;
  };
  struct wait_thread_entry {
    std::uint64_t tid;
    live_hist hist;
  };
  struct worker_entry {
    std::uint64_t tid, batches, busy_ns, last_end_ns;
    std::uint64_t inflight_ns;  // the batch in progress began (CLOCK_REALTIME); 0: none
  };
  /// Cumulative figures at a 1 s step: the window is now minus the oldest step kept.
  struct snapshot {
    std::uint64_t at_ns, consumed, wait_ns, batches;
    std::uint64_t op_count[live_max_ops];
    std::uint64_t busy_ns[live_max_workers];
  };
  static constexpr std::size_t site_slots = 2 * live_max_sites;  // a power of two
  static constexpr std::size_t header_bytes = 46;  // "lotus-live 1 <gen:20> <used:10>\n"

  LOTUS_DETAIL_COLD void reset() noexcept {
    std::memset(sites_, 0, sizeof sites_);
    site_count_ = 0;
    op_count_ = 0;
    worker_count_ = 0;
    shown_count_ = 0;
    last_tid_ = 0;
    last_worker_ = nullptr;
    wait_ = live_hist{};
    wait_thread_count_ = 0;
    consumed_ = 0;
    overflow_ = 0;
    worker_overflow_ = 0;
    role_main_ = false;
    published_at_ = 0;
    gen_ = 0;
    snaps_ = 0;
    where_.clear();
    started_ns_ = clock_ns(CLOCK_REALTIME);
    start_ticks_ = process_start();
    overflow_site_ = site{nullptr, kind_overflow, 0};
    std::memset(&ring_[0], 0, sizeof ring_[0]);
    ring_[0].at_ns = started_ns_;
    snaps_ = 1;
  }

  /// The bucket of `dur`: the first bound not below it. Bounds are at least 2x apart, so at most
  /// one lies within [2^(b-1), 2^b): one table read and one compare, no branch.
  unsigned bucket_of(std::uint64_t dur) const noexcept {
    const unsigned bits = dur == 0 ? 0u : 64u - static_cast<unsigned>(__builtin_clzll(dur));
    const unsigned i = first_bucket_[bits];
    return i + (dur > bound_or_max_[i] ? 1u : 0u);
  }

  void add(live_hist& h, std::uint64_t dur) noexcept {
    ++h.bucket[bucket_of(dur)];
    ++h.count;
    h.sum_ns += dur;
  }

  static std::size_t slot_of(const record_site* key) noexcept {
    const auto v = reinterpret_cast<std::uintptr_t>(key);
    return static_cast<std::size_t>((v >> 4) ^ (v >> 13)) & (site_slots - 1);
  }

  LOTUS_DETAIL_NOINLINE site* find_site(const label_table::label& n) noexcept {
    std::size_t i = slot_of(n.key);
    for (;; i = (i + 1) & (site_slots - 1)) {
      site& s = sites_[i];
      if (s.key == n.key) break;
      if (s.key == nullptr) {
        if (site_count_ == live_max_sites) return &overflow_site_;  // not cached: counted each time
        ++site_count_;
        s.key = n.key;
        classify(s, n);
        break;
      }
    }
    return &sites_[i];
  }

  /// Whether label `n` is the record name of `site`: `S` and its name.
  static bool is(const label_table::label& n, const record_site& site) noexcept {
    const std::string_view name(site.name);
    return n.size == name.size() + 1 && n.text[0] == 'S' &&
           std::memcmp(n.text + 1, name.data(), name.size()) == 0;
  }

  LOTUS_DETAIL_COLD void classify(site& s, const label_table::label& n) noexcept {
    const std::uint32_t flags = n.key->flags;
    const bool main = (flags & flag_main) != 0;
    s.kind = kind_other;
    constexpr std::size_t family = sizeof batch_family - 1;
    if (main && is(n, batch_wait_loc)) {
      s.kind = kind_wait;
    } else if (main && is(n, batch_consumed_loc)) {
      s.kind = kind_consumed;
    } else if (!main && (flags & flag_indexed) != 0 && is(n, batch_preprocessed_loc)) {
      s.kind = kind_batch;
    } else if (n.size > family && n.text[0] == 'S' &&
               std::memcmp(n.text + 1, batch_family, family) == 0) {
      s.kind = kind_other;  // queued markers, pin-memory spans: not ops
    } else {
      // An op: the name without its S, shared by every site of that name.
      const char* name = n.size > 0 ? n.text + 1 : n.text;
      const std::size_t size = n.size > 0 ? n.size - 1 : 0;
      s.kind = kind_overflow;
      if (size == 0 || size > live_max_name) return;
      for (std::size_t k = 0; k < op_count_; ++k) {
        if (ops_[k].size == size && std::memcmp(ops_[k].name, name, size) == 0) {
          s.kind = kind_op;
          s.op = static_cast<std::uint16_t>(k);
          return;
        }
      }
      if (op_count_ == live_max_ops) return;
      op_entry& o = ops_[op_count_];
      std::memcpy(o.name, name, size);
      o.size = size;
      o.hist = live_hist{};
      s.kind = kind_op;
      s.op = static_cast<std::uint16_t>(op_count_++);
    }
  }

  void worker_batch(std::uint64_t tid, std::uint64_t start, std::uint64_t dur) noexcept {
    worker_entry* w = tid == last_tid_ ? last_worker_ : nullptr;
    if (w == nullptr) {
      for (std::size_t k = 0; k < worker_count_; ++k) {
        if (workers_[k].tid == tid) w = &workers_[k];
      }
      if (w == nullptr) {
        if (worker_count_ == live_max_workers) {
          ++worker_overflow_;
          return;
        }
        w = &workers_[worker_count_++];
        *w = worker_entry{tid, 0, 0, 0, 0};
      }
      last_tid_ = tid;
      last_worker_ = w;
    }
    ++w->batches;
    w->busy_ns += dur;
    if (start + dur > w->last_end_ns) w->last_end_ns = start + dur;
  }

  /// A wait of thread `tid` into its own histogram (the first live_max_wait_threads threads).
  void wait_thread(std::uint64_t tid, std::uint64_t dur) noexcept {
    for (std::size_t k = 0; k < wait_thread_count_; ++k) {
      if (wait_threads_[k].tid == tid) {
        add(wait_threads_[k].hist, dur);
        return;
      }
    }
    if (wait_thread_count_ == live_max_wait_threads) return;
    wait_thread_entry& e = wait_threads_[wait_thread_count_++];
    e.tid = tid;
    e.hist = live_hist{};
    add(e.hist, dur);
  }

  /// Keeps a cumulative snapshot per second: ring_ holds the last live_window_steps + 1.
  void step(std::uint64_t now) noexcept {
    const snapshot& newest = ring_[(snaps_ - 1) % ring_size];
    if (now - newest.at_ns < 1000000000u) return;
    snapshot& s = ring_[snaps_ % ring_size];
    s.at_ns = now;
    fill(s);
    ++snaps_;
  }

  void fill(snapshot& s) const noexcept {
    s.consumed = consumed_;
    s.wait_ns = wait_.sum_ns;
    s.batches = 0;
    for (std::size_t k = 0; k < worker_count_; ++k) s.batches += workers_[k].batches;
    for (std::size_t k = 0; k < live_max_ops; ++k) {
      s.op_count[k] = k < op_count_ ? ops_[k].hist.count : 0;
    }
    for (std::size_t k = 0; k < live_max_workers; ++k) {
      s.busy_ns[k] = k < worker_count_ ? busy_at(workers_[k], s.at_ns) : 0;
    }
  }

  /// A worker's busy time at `at`: its batches, and the part of the batch in progress by then.
  LOTUS_DETAIL_COLD static std::uint64_t busy_at(const worker_entry& w, std::uint64_t at) noexcept {
    return w.busy_ns + (w.inflight_ns != 0 && w.inflight_ns < at ? at - w.inflight_ns : 0);
  }

  // ---- the file's text (FORMAT.md §9) --------------------------------------------------------
  // put* stay out of line: format_body calls them ~100 times, and inlined they cost every file
  // that includes lotus without lotus::lotus 0.9 G compiler instructions, 7 % of its compile
  // (bench/runtime/compile_cost.sh, IR=perf). The body is written once per writer cycle.
  LOTUS_DETAIL_COLD LOTUS_DETAIL_NOINLINE void put(const char* s, std::size_t n) noexcept {
    if (cut_ || used_ + n > live_file_bytes - 8) {  // room for "end\n" kept
      cut_ = true;
      return;
    }
    std::memcpy(buf_ + used_, s, n);
    used_ += n;
  }
  LOTUS_DETAIL_COLD LOTUS_DETAIL_NOINLINE void put(std::string_view s) noexcept {
    put(s.data(), s.size());
  }
  LOTUS_DETAIL_COLD LOTUS_DETAIL_NOINLINE void put(std::uint64_t v) noexcept {
    char tmp[24];
    char* q = tmp + sizeof tmp;
    do {
      *--q = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    put(q, static_cast<std::size_t>(tmp + sizeof tmp - q));
  }
  /// A name: control bytes and spaces become '_' (names are the last field of their line).
  LOTUS_DETAIL_COLD LOTUS_DETAIL_NOINLINE void put_name(const char* s, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) {
      const char out = token_name_char(s[i]);
      put(&out, 1);
    }
  }
  /// `inflight <tid> <batch|op|wait> <since> <idx> <name>` (name `-` but for an op).
  LOTUS_DETAIL_COLD void put_inflight(const inflight_entry& e) noexcept {
    static const char* const what[] = {"batch", "op", "wait"};
    put("inflight ");
    put(e.tid);
    put(" ");
    put(what[e.what]);
    put(" ");
    put(e.since_ns);
    put(" ");
    put(e.idx);
    put(" ");
    if (e.what == inflight_entry::op && e.loc != nullptr && e.loc->name != nullptr &&
        e.loc->name[0] != '\0') {
      put_name(e.loc->name, ::strnlen(e.loc->name, live_max_name));
    } else {
      put("-");
    }
    put("\n");
  }
  LOTUS_DETAIL_COLD LOTUS_DETAIL_NOINLINE void put_hist(const live_hist& h) noexcept {
    put(h.count);
    put(" ");
    put(h.sum_ns);
    for (unsigned i = 0; i < live_buckets; ++i) {
      put(" ");
      put(h.bucket[i]);
    }
  }
  /// The sidecar's `host`, `rank`, `local_rank` and `world_size` lines, as they are.
  LOTUS_DETAIL_COLD void put_identity(const text& info) noexcept {
    std::string_view rest(info.c_str(), info.size());
    while (!rest.empty()) {
      const std::size_t eol = rest.find('\n');
      const std::string_view line = rest.substr(0, eol);
      rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
      for (const std::string_view key : {"host ", "rank ", "local_rank ", "world_size "}) {
        if (line.substr(0, key.size()) == key) {
          put(line);
          put("\n");
        }
      }
    }
  }

  LOTUS_DETAIL_COLD void format_body(std::uint64_t now, const trace_stats& st, const text& info,
                                     bool final) noexcept {
    used_ = header_bytes;
    cut_ = false;
    const snapshot& old =
        ring_[snaps_ > live_window_steps + 1 ? (snaps_ - live_window_steps - 1) % ring_size : 0];
    snapshot cur;
    cur.at_ns = now;
    fill(cur);
    put("pid ");
    put(static_cast<std::uint64_t>(::getpid()));
    put("\nppid ");
    put(static_cast<std::uint64_t>(::getppid()));
    put("\nstart ");
    put(start_ticks_);
    put("\n");
    put_identity(info);
    put(role_main_ ? "role main\n" : "role worker\n");
    put("updated ");
    put(now);
    put("\nsince ");
    put(started_ns_);
    put("\nfinal ");
    put(final ? "1" : "0");
    put("\nrecorded ");
    put(st.recorded);
    put("\ndropped ");
    put(st.dropped);
    put("\noverflow ");
    put(overflow_);
    put(" ");
    put(worker_overflow_);
    put("\nbounds");
    for (unsigned i = 0; i < live_bounds; ++i) {
      put(" ");
      put(live_bounds_ns[i]);
    }
    put("\nwindow ");
    put(now - old.at_ns);
    put(" ");
    put(consumed_ - old.consumed);
    put(" ");
    put(wait_.sum_ns - old.wait_ns);
    put(" ");
    put(cur.batches - old.batches);
    put("\nconsumed ");
    put(consumed_);
    // An iterator's start in this process (lotus.torch), while it lasts and once it is over.
    if (const startup_progress_state& su = startup_progress();
        su.pid.load(mo_relaxed) == static_cast<int>(::getpid())) {
      if (const std::uint64_t b = su.begin_ns.load(mo_acquire); b != 0) {
        put("\nstartup ");
        put(b);
        put(" ");
        put(su.workers.load(mo_relaxed));
        put(" ");
        put(su.started.load(mo_relaxed));
        put(" ");
        put(su.first_ns.load(mo_relaxed));
        put(" ");
        put(su.init_end_ns.load(mo_relaxed));
      }
    }
    put("\nwait ");
    put_hist(wait_);
    put("\n");
    for (std::size_t k = 0; k < wait_thread_count_; ++k) {
      put("wait_thread ");
      put(wait_threads_[k].tid);
      put(" ");
      put_hist(wait_threads_[k].hist);
      put("\n");
    }
    for (std::size_t k = 0; k < worker_count_; ++k) {
      const worker_entry& w = workers_[k];
      put("worker ");
      put(w.tid);
      put(" ");
      put(w.batches);
      // Never below what an older body said: a batch that ends adds its whole duration.
      const std::uint64_t busy = busy_at(w, now);
      put(" ");
      put(busy);
      put(" ");
      put(busy > old.busy_ns[k] ? busy - old.busy_ns[k] : 0);
      put(" ");
      put(w.last_end_ns);
      put("\n");
    }
    for (std::size_t k = 0; k < op_count_; ++k) {
      const op_entry& o = ops_[k];
      put("op ");
      put(o.hist.count - old.op_count[k]);
      put(" ");
      put_hist(o.hist);
      put(" ");
      put_name(o.name, o.size);
      put("\n");
    }
    for (std::size_t i = 0; i < shown_count_; ++i) put_inflight(shown_[i]);
    const bool cut = cut_;
    cut_ = false;
    if (cut) put("cut\n");
    put("end\n");
  }

  /// The files this runtime made (by identity), so that a prefix configured again reuses its own.
  LOTUS_DETAIL_COLD void remember(const trace_files::live_file& f) noexcept {
    for (std::size_t i = 0; i < mine_count_; ++i) {
      if (mine_[i].dev == f.dev && mine_[i].ino == f.ino) return;
    }
    if (mine_count_ < max_mine) mine_[mine_count_++] = f;
  }

  /// A file adopted from an earlier runtime of this process: go on from its generation, so that a
  /// reader never sees a generation again with another body.
  LOTUS_DETAIL_COLD void continue_generation() noexcept {
    char h[header_bytes];
    if (::pread(file_.fd, h, sizeof h, 0) != static_cast<ssize_t>(sizeof h)) return;
    if (std::memcmp(h, "lotus-live 1 ", 13) != 0) return;
    std::uint64_t g = 0;
    for (int i = 13; i < 33; ++i) {
      if (h[i] < '0' || h[i] > '9') return;
      g = g * 10 + static_cast<std::uint64_t>(h[i] - '0');
    }
    if (g >= gen_) gen_ = g + (g % 2);  // even: the next rewrite starts odd
  }

  LOTUS_DETAIL_COLD void write_header(std::uint64_t gen) noexcept {
    char h[header_bytes + 1];
    std::memcpy(h, "lotus-live 1 ", 13);
    std::uint64_t g = gen;
    for (int i = 32; i >= 13; --i, g /= 10) h[i] = static_cast<char>('0' + g % 10);
    h[33] = ' ';
    std::uint64_t u = used_;
    for (int i = 43; i >= 34; --i, u /= 10) h[i] = static_cast<char>('0' + u % 10);
    h[44] = '\n';
    h[45] = '\n';  // a blank line: the body starts after it
    pwrite_all(0, h, header_bytes);
  }

  LOTUS_DETAIL_COLD void pwrite_all(std::size_t at, const char* data, std::size_t n) noexcept {
    std::size_t done = 0;
    while (done < n) {
      const ssize_t w = ::pwrite(file_.fd, data + done, n - done, static_cast<off_t>(at + done));
      if (w > 0) {
        done += static_cast<std::size_t>(w);
      } else if (!(w < 0 && errno == EINTR)) {
        return;  // a full disk cannot shrink a file already allocated; nothing else to do
      }
    }
  }

  static constexpr std::size_t ring_size = live_window_steps + 2;

  site sites_[site_slots];
  std::size_t site_count_ = 0;
  site overflow_site_{};
  op_entry ops_[live_max_ops];
  std::size_t op_count_ = 0;
  worker_entry workers_[live_max_workers];
  inflight_entry shown_[live_max_inflight];  // the last scan's, as the file shows them
  std::size_t shown_count_ = 0;
  std::size_t worker_count_ = 0;
  std::uint64_t last_tid_ = 0;
  worker_entry* last_worker_ = nullptr;
  live_hist wait_;
  wait_thread_entry wait_threads_[live_max_wait_threads];
  std::size_t wait_thread_count_ = 0;
  std::uint64_t consumed_ = 0, overflow_ = 0, worker_overflow_ = 0;
  bool role_main_ = false;
  std::uint8_t first_bucket_[65] = {};
  std::uint64_t bound_or_max_[live_buckets] = {};
  snapshot ring_[ring_size];
  std::uint64_t snaps_ = 0;
  std::uint64_t started_ns_ = 0, start_ticks_ = 0, published_at_ = 0, gen_ = 0;
  bool on_ = true;  // LOTUS_LIVE (settings::live, set_on)
  static constexpr std::size_t max_mine = 64;
  trace_files::live_file mine_[max_mine];
  std::size_t mine_count_ = 0;
  trace_files::live_file file_;
  bool failed_ = false;
  text where_;  // the directory and prefix of the file fd_ is
  char buf_[live_file_bytes];
  std::size_t used_ = 0;
  bool cut_ = false;
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
