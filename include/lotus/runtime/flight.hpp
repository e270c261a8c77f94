// lotus — the flight recorder: the last seconds in memory, written as a capture on a trigger
// SPDX-License-Identifier: MIT
// (internal; writer thread only: the request format, the triggers and the settings that lotus-tool
// shares are in capture_request.hpp)
#pragma once

#include <errno.h>     // errno
#include <fcntl.h>     // open, O_*
#include <sys/stat.h>  // fstat, lstat, mkdir
#include <time.h>      // gmtime_r
#include <unistd.h>    // getpid, getppid, pread, write, close

#include <cstddef>      // offsetof, size_t
#include <cstdint>      // uint64_t
#include <cstdio>       // snprintf
#include <cstdlib>      // malloc, free
#include <cstring>      // memcpy, strerror
#include <new>          // nothrow
#include <string_view>  // string_view

#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"
#include "lotus/detail/clock.hpp"
#include "lotus/detail/inflight.hpp"
#include "lotus/detail/record_name.hpp"
#include "lotus/record_site.hpp"
#include "lotus/runtime/capture_request.hpp"
#include "lotus/runtime/diagnostics.hpp"
#include "lotus/runtime/text.hpp"
#include "lotus/runtime/threads.hpp"
#include "lotus/runtime/trace_files.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// Requests one process holds until their window ends; more are skipped (counted, one message,
/// and the count at exit).
constexpr unsigned flight_max_pending = 16;
/// Automatic captures one process asks for (a job that stalls all day must not fill the disk
/// with captures); on-demand ones are not counted.
constexpr unsigned flight_max_auto = 64;
/// How long a process's part of a capture waits, past the window's end, for the stall it holds
/// to end: a part written while its process was still inside a wait or a batch that began by the
/// window's end is written again, whole, once that ended (and the tail after it), or at the
/// window's end + this, cut there (its `inflight` lines say where).
constexpr std::uint64_t flight_complete_ns = std::uint64_t{10} * 1000000000u;
/// Parts one process keeps open for completion at once; a part beyond them stays as first
/// written (cut where the window ended).
constexpr unsigned flight_max_open = 4;

/// The window: every thread's formatted records of the last LOTUS_FLIGHT seconds, as chunks in
/// drain order (one per thread, file and writer cycle), bounded by LOTUS_FLIGHT_BYTES; the
/// triggers; the control file; the captures. Writer thread only.
class flight_recorder {
 public:
  enum : unsigned char { chunk_worker, chunk_main, chunk_sidecar };

  flight_recorder() = default;
  flight_recorder(const flight_recorder&) = delete;
  flight_recorder& operator=(const flight_recorder&) = delete;

  bool on() const noexcept { return set_.window_ns != 0; }
  /// The wait triggers need SBatchWait records (observe_wait).
  bool watching() const noexcept { return set_.wait_ns != 0 || set_.share_permille != 0; }

  /// New settings (at a writer cycle). Turning flight mode off or on starts an empty window.
  LOTUS_DETAIL_COLD void apply(const flight_settings& s, std::uint64_t now) noexcept {
    if ((s.window_ns != 0) != on()) reset(now);
    set_ = s;
    holdoff_ns_ = s.window_ns;
  }

  /// A new trace directory (or flight mode turned on or off): an empty window, the new
  /// directory's control file read from requests ending after `now` on.
  LOTUS_DETAIL_COLD void reset(std::uint64_t now) noexcept {
    drop_parts();
    free_chunks();
    started_ns_ = now;
    for (control_state& c : control_) c = control_state{};
    listing_ = control_listing{};
    pending_count_ = 0;
    waits_count_ = 0;
    wait_fired_ = false;
    holdoff_until_ = 0;
  }

  /// An SBatchWait record the writer formatted (start and duration in epoch ns), start-up until
  /// `until` (wait_recorded_until).
  void observe_wait(std::uint64_t start, std::uint64_t dur, std::uint64_t idx,
                    std::uint64_t until) noexcept {
    const std::uint64_t end = start + dur;
    if (set_.share_permille != 0) {
      waits_[waits_count_++ % max_waits] = wait_span{start, end};
    }
    // A wait while some worker of the iterator has not begun its first item (spawn: seconds of
    // imports; worker_init_fn) is no stall until the last one has (wait_recorded_until). A wait
    // the in-progress check fired for already (same start) is within the hold-off.
    if (set_.wait_ns != 0 && wait_beyond(until, start, end) > set_.wait_ns && !wait_fired_ &&
        start >= holdoff_until_) {
      wait_fired_ = true;
      wait_idx_ = idx;
      wait_dur_ = dur;
      wait_start_ = start;
    }
  }

  /// The spans in progress the writer read this cycle (inflight.hpp): `batch>`, `op>`,
  /// `op:NAME>` and `wait>` fire while the anomaly lasts, in the process where it happens, once
  /// an entry read at two cycles in a row is older than its threshold.
  void in_progress(const inflight_entry* e, std::size_t n) noexcept {
    inflight_ = e;
    inflight_count_ = n;
  }

 private:
  LOTUS_DETAIL_COLD void fire_in_progress(trace_files& files, std::uint64_t now) noexcept {
    const inflight_entry* e = inflight_;
    const std::size_t n = inflight_count_;
    for (std::size_t i = 0; i < n; ++i) {
      if (!e[i].confirmed || e[i].since_ns >= now) continue;
      const std::uint64_t age = now - e[i].since_ns;
      char reason[320];  // flight_set_reason keeps what fits a request
      reason[0] = '\0';
      const unsigned long long ms = age / 1000000;
      if (e[i].what == inflight_entry::batch && set_.batch_ns != 0 && age > set_.batch_ns) {
        std::snprintf(reason, sizeof reason,
                      "batch>%llums: thread %llu inside batch %llu for %llu ms",
                      static_cast<unsigned long long>(set_.batch_ns / 1000000),
                      static_cast<unsigned long long>(e[i].tid),
                      static_cast<unsigned long long>(e[i].idx), ms);
      } else if (e[i].what == inflight_entry::wait && set_.wait_ns != 0 &&
                 wait_beyond(e[i].until, e[i].since_ns, now) > set_.wait_ns) {
        // A wait while the iterator's workers start (spawn: seconds of imports, unevenly;
        // worker_init_fn) counts from when the last of them began its first item.
        std::snprintf(reason, sizeof reason,
                      "wait>%llums: waiting for batch %llu for %llu ms (still waiting)",
                      static_cast<unsigned long long>(set_.wait_ns / 1000000),
                      static_cast<unsigned long long>(e[i].idx), ms);
      } else if (e[i].what == inflight_entry::op && e[i].loc != nullptr) {
        char name[flight_max_op_name + 1];
        op_name(e[i].loc, name);
        std::uint64_t limit = set_.op_ns;
        bool named = false;  // the condition is op:NAME> (the lower threshold of the two)
        for (unsigned k = 0; k < set_.named_count; ++k) {
          if (std::strcmp(set_.named[k].name, name) == 0 &&
              (limit == 0 || set_.named[k].ns < limit)) {
            limit = set_.named[k].ns;
            named = true;
          }
        }
        if (limit != 0 && age > limit) {
          std::snprintf(
              reason, sizeof reason, "op%s%s>%llums: %s in progress on thread %llu for %llu ms",
              named ? ":" : "", named ? name : "", static_cast<unsigned long long>(limit / 1000000),
              name, static_cast<unsigned long long>(e[i].tid), ms);
        }
      }
      if (reason[0] != '\0') fire(files, e[i].since_ns, now, reason);
    }
  }

  /// An op's name as traced (without its S; spaces and control bytes `_`), at most
  /// flight_max_op_name bytes.
  LOTUS_DETAIL_COLD static void op_name(const record_site* loc,
                                        char (&out)[flight_max_op_name + 1]) noexcept {
    std::size_t n = 0;
    for (const char* p = loc->name; p != nullptr && *p != '\0' && n < flight_max_op_name; ++p) {
      out[n++] = token_name_char(*p);
    }
    out[n] = '\0';
  }

  /// The `inflight` lines of a capture's sidecar: what was still in progress when it was
  /// written (a stall longer than the capture: the capture is cut, and says where).
  LOTUS_DETAIL_COLD bool inflight_line(std::size_t i, text& line) const noexcept {
    static const char* const what[] = {"batch", "op", "wait"};
    {
      const inflight_entry& e = inflight_[i];
      if (e.what == inflight_entry::op && !e.innermost) return false;
      line.add("inflight ").add(e.tid).add(' ').add(what[e.what]).add(' ').add(e.since_ns);
      line.add(' ').add(e.idx).add(' ');
      if (e.what == inflight_entry::op && e.loc != nullptr) {
        char name[flight_max_op_name + 1];
        op_name(e.loc, name);
        line.add(name[0] != '\0' ? name : "-");
      } else {
        line.add('-');
      }
      line.add('\n');
    }
    return !line.overflow;
  }

 public:
  /// Keeps `n` bytes of whole lines (`lines` records) drained at `now`; false when out of
  /// memory (the caller counts them as dropped). Older chunks beyond LOTUS_FLIGHT_BYTES go.
  bool keep(std::uint64_t tid, const char* name, unsigned char kind, const char* data,
            std::size_t n, std::uint64_t lines, std::uint64_t sanitized,
            std::uint64_t now) noexcept {
    if (n == 0) return true;
    void* mem = std::malloc(offsetof(chunk, data) + n);
    if (mem == nullptr) return false;
    chunk* c = static_cast<chunk*>(mem);
    c->next = nullptr;
    c->stamp_ns = now;
    c->tid = tid;
    c->lines = lines;
    c->sanitized = sanitized;
    c->size = n;
    c->kind = kind;
    std::size_t len = 0;
    while (len + 1 < sizeof c->name && name[len] != '\0') ++len;
    std::memcpy(c->name, name, len);
    c->name[len] = '\0';
    std::memcpy(c->data, data, n);
    if (tail_ != nullptr) {
      tail_->next = c;
    } else {
      head_ = c;
    }
    tail_ = c;
    held_ += offsetof(chunk, data) + n;
    while (held_ > set_.max_bytes && head_ != nullptr) pop(true);
#ifdef LOTUS_TEST_HOOKS
    std::uint64_t seen = test_hooks::flight_max_held.load(mo_relaxed);
    while (held_ > seen &&
           !test_hooks::flight_max_held.compare_exchange_weak(seen, held_, mo_relaxed)) {
    }
#endif
    return true;
  }

  /// An on-demand capture (lotus::capture): appended to the control file at the next cycle.
  LOTUS_DETAIL_COLD void ask(std::string_view reason, std::uint64_t now) noexcept {
    if (asks_count_ == max_asks) return;
    flight_request& r = asks_[asks_count_++];
    r = flight_request{};
    r.trigger_ns = now;
    r.end_ns = now + set_.margin_ns;
    flight_set_reason(r, reason.empty() ? std::string_view("lotus.capture") : reason);
  }

  /// Once per writer cycle, after the drains: trims the window, evaluates the triggers, reads
  /// the control file and writes the captures whose window has ended (all of them at `final`).
  /// `header()`: the sidecar's first lines for this process (called when a capture is written).
  template <class Header>
  LOTUS_DETAIL_COLD void cycle(trace_files& files, Header&& header, std::uint64_t now,
                               bool final) noexcept {
    if (!on() || files.disabled()) return;
    trim(now);
    poll(files);  // requests of other processes first: a stall they captured is not captured twice
    fire_triggers(files, now);
    if (!final) fire_in_progress(files, now);
    for (unsigned i = 0; i < asks_count_; ++i) {
      flight_make_id(asks_[i].id, asks_[i].trigger_ns, static_cast<std::uint64_t>(::getpid()),
                     ++seq_);
      append(files, asks_[i]);
    }
    asks_count_ = 0;
    poll(files);
    if (final && pending_skipped_ != 0) {
      diag_config("flight recorder: %llu capture request(s) skipped in all: %u were pending",
                  static_cast<unsigned long long>(pending_skipped_), flight_max_pending);
      pending_skipped_ = 0;
    }
    for (unsigned i = 0; i < pending_count_;) {
      if (final || pending_[i].end_ns <= now) {
        write_capture(files, header(), pending_[i], final);
        pending_[i] = pending_[--pending_count_];
      } else {
        ++i;
      }
    }
    complete_parts(files, header, now, final);
  }

  /// In a forked child: the parent's records are not this process's; requests still pending
  /// are (the child writes its own records of their window).
  LOTUS_DETAIL_COLD void fork_child() noexcept {
    drop_parts();
    free_chunks();
    waits_count_ = 0;
    wait_fired_ = false;
    asks_count_ = 0;
  }

 private:
  struct chunk {
    chunk* next;
    std::uint64_t stamp_ns;  // drain time: every record in it ended before
    std::uint64_t tid, lines, sanitized;
    std::size_t size;
    unsigned char kind;
    char name[17];
    char data[1];
  };
  struct wait_span {
    std::uint64_t start, end;
  };
  static constexpr unsigned max_waits = 4096;
  static constexpr unsigned max_asks = 8;
  static constexpr unsigned max_evictions = 256;

  void pop(bool bound) noexcept {
    chunk* c = head_;
    head_ = c->next;
    if (head_ == nullptr) tail_ = nullptr;
    held_ -= offsetof(chunk, data) + c->size;
    if (bound && c->kind != chunk_sidecar) {
      evicted_[evicted_count_++ % max_evictions] = eviction{c->stamp_ns, c->lines};
    }
    std::free(c);
  }

  LOTUS_DETAIL_COLD void free_chunks() noexcept {
    while (head_ != nullptr) pop(false);
    held_ = 0;
    evicted_count_ = 0;
  }

  /// The first moment a capture of `r` holds: LOTUS_FLIGHT seconds before its anomaly began.
  std::uint64_t window_from(const flight_request& r) const noexcept {
    return r.trigger_ns > set_.window_ns ? r.trigger_ns - set_.window_ns : 0;
  }

  /// Chunks older than the window and the triggers' lookback (a stall is seen some time after it
  /// began: its lead-up must still be here), or than a pending capture's window, age out: not
  /// lost.
  LOTUS_DETAIL_COLD void trim(std::uint64_t now) noexcept {
    const std::uint64_t keep = set_.window_ns + set_.lookback_ns();
    std::uint64_t keep_from = now > keep ? now - keep : 0;
    for (unsigned i = 0; i < pending_count_; ++i) {
      const std::uint64_t from = window_from(pending_[i]);
      if (from < keep_from) keep_from = from;
    }
    for (unsigned i = 0; i < open_count_; ++i) {  // what an open part has not written yet
      if (open_[i]->written_to < keep_from) keep_from = open_[i]->written_to;
    }
    while (head_ != nullptr && head_->stamp_ns < keep_from) pop(false);
  }

  /// wait> (seen by observe_wait) and waitshare> (over the recent SBatchWait spans).
  LOTUS_DETAIL_COLD void fire_triggers(trace_files& files, std::uint64_t now) noexcept {
    char reason[192];
    if (wait_fired_) {
      wait_fired_ = false;
      std::snprintf(reason, sizeof reason, "wait>%llums: SBatchWait_%llu waited %llu ms",
                    static_cast<unsigned long long>(set_.wait_ns / 1000000),
                    static_cast<unsigned long long>(wait_idx_),
                    static_cast<unsigned long long>(wait_dur_ / 1000000));
      fire(files, wait_start_, now, reason);
    }
    if (set_.share_permille == 0 || now < holdoff_until_) return;
    const std::uint64_t w = set_.share_window_ns;
    const std::uint64_t from = now > w ? now - w : 0;
    std::uint64_t waited = 0;
    const unsigned n = waits_count_ < max_waits ? waits_count_ : max_waits;
    for (unsigned i = 0; i < n; ++i) {
      const wait_span& s = waits_[i];
      const std::uint64_t a = s.start > from ? s.start : from;
      const std::uint64_t b = s.end < now ? s.end : now;
      if (b > a) waited += b - a;
    }
    if (waited / 1000 * 1000 > set_.share_permille * (w / 1000)) {
      std::snprintf(reason, sizeof reason,
                    "waitshare>%llu.%llu%%/%llums: waited %llu ms of %llu ms",
                    static_cast<unsigned long long>(set_.share_permille / 10),
                    static_cast<unsigned long long>(set_.share_permille % 10),
                    static_cast<unsigned long long>(w / 1000000),
                    static_cast<unsigned long long>(waited / 1000000),
                    static_cast<unsigned long long>(w / 1000000));
      fire(files, now, now, reason);
    }
  }

  /// An automatic trigger at `when`: one request, then the hold-off (LOTUS_FLIGHT seconds).
  LOTUS_DETAIL_COLD void fire(trace_files& files, std::uint64_t when, std::uint64_t now,
                              const char* reason) noexcept {
    if (when < holdoff_until_) return;
    holdoff_until_ = when + holdoff_ns_;
    if (auto_count_ == flight_max_auto) {
      if (!auto_capped_) {
        auto_capped_ = true;
        diag_config(
            "flight recorder: %u automatic captures taken; no more are asked for by this "
            "process (lotus-tool capture still works)",
            flight_max_auto);
      }
      return;
    }
    // One stall, one capture: an anomaly that began by the end of a capture another process of
    // the directory asked for, or this one (a worker whose batch stalled the loop, ranks stalled
    // together), after its trigger, or before it inside its window when an automatic trigger
    // asked for it (the loop's wait> fired before the stuck worker's batch>), joins it. That
    // capture holds its lead-up, and this process's part of it stays open until it ends.
    for (unsigned i = 0; i < pending_count_; ++i) {
      if (joins(pending_[i], when)) return;
    }
    for (unsigned i = 0; i < open_count_; ++i) {
      if (joins(open_[i]->r, when)) return;
    }
    flight_request r;
    r.trigger_ns = when;
    r.end_ns = now + set_.margin_ns;
    flight_set_reason(r, reason);
    flight_make_id(r.id, when, static_cast<std::uint64_t>(::getpid()), ++seq_);
    ++auto_count_;
    if (append(files, r)) {
      diag_config("flight recorder: %s; capture in %s/capture-%s", reason, files.dir().c_str(),
                  r.id);
    }
  }

  LOTUS_DETAIL_COLD bool joins(const flight_request& p, std::uint64_t when) const noexcept {
    if (p.pid != 0 || when > p.end_ns) return false;
    if (p.trigger_ns <= when) return true;
    return window_from(p) <= when && automatic(p);
  }

  /// A request an automatic trigger wrote (its reason starts with the condition that fired).
  LOTUS_DETAIL_COLD static bool automatic(const flight_request& p) noexcept {
    for (const char* c : {"wait>", "waitshare>", "batch>", "op>", "op:"}) {
      if (std::strncmp(p.reason, c, std::strlen(c)) == 0) return true;
    }
    return false;
  }

  LOTUS_DETAIL_COLD bool append(trace_files& files, const flight_request& r) noexcept {
    char line[320];
    const std::size_t n = flight_request_line(r, line, sizeof line);
    if (n == 0 || !files.charge(n)) {
      // Once per process: every later capture over the budget would say the same.
      diag(topic::capture_budget,
           "flight recorder: capture %s not requested (LOTUS_MAX_BYTES reached); later captures "
           "are not requested either while the budget is spent",
           r.id);
      return false;
    }
    const char* why = nullptr;
    int err = 0;
    files.make_dir();
    if (!flight_append_request(files.dir().c_str(), r, &why, &err)) {
      diag(topic::capture_failed, "flight recorder: capture %s not requested: %s in %s%s%s", r.id,
           why, files.dir().c_str(), err != 0 ? ": " : "", err != 0 ? std::strerror(err) : "");
      return false;
    }
    return true;
  }

  /// Reads what this user's control files gained since the last cycle (one stat of the directory
  /// and one lstat per file when nothing changed): the first name and the private ones
  /// (capture_request.hpp), listed again whenever the directory changed. A file that is not this
  /// user's regular file with one link is never read (checked before every read: lstat, then
  /// fstat of the descriptor read from), with one message.
  LOTUS_DETAIL_COLD void poll(trace_files& files) noexcept {
    const auto uid = static_cast<std::uint64_t>(::geteuid());
    const char* dir = files.dir().c_str();
    struct stat ds {};
    if (::stat(dir, &ds) != 0) return;
    control_listing& l = listing_;
    const std::uint64_t mtime = static_cast<std::uint64_t>(ds.st_mtim.tv_sec) * 1000000000u +
                                static_cast<std::uint64_t>(ds.st_mtim.tv_nsec);
    // Listed again when the directory changed, and for 2 s after a change (file systems whose
    // timestamps are coarser than the writer's cycle: a file created within the same tick).
    if (!l.valid || l.dev != static_cast<std::uint64_t>(ds.st_dev) ||
        l.ino != static_cast<std::uint64_t>(ds.st_ino) || l.mtime_ns != mtime ||
        l.listed_ns < mtime + 2000000000u) {
      bool taken = false;
      l.count = flight_control_list(dir, uid, l.files, flight_control_names, &taken);
      l.valid = true;
      l.dev = static_cast<std::uint64_t>(ds.st_dev);
      l.ino = static_cast<std::uint64_t>(ds.st_ino);
      l.mtime_ns = mtime;
      timespec ts{};
      ::clock_gettime(CLOCK_REALTIME, &ts);
      l.listed_ns = static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u +
                    static_cast<std::uint64_t>(ts.tv_nsec);
      if (taken) refuse_control(flight_control_path(dir, uid, 0));
    }
    // Each file keeps its reading state (by inode) however the listing orders them.
    struct stat sts[flight_control_names];
    int slot[flight_control_names];
    bool used[flight_control_names] = {};
    for (unsigned i = 0; i < l.count; ++i) {
      slot[i] = -2;  // not read
      const text path = control_file(dir, l.files[i]);
      if (path.overflow || ::lstat(path.c_str(), &sts[i]) != 0) continue;
      if (!flight_control_owned(sts[i])) {
        refuse_control(path);
        continue;
      }
      slot[i] = -1;
      for (unsigned j = 0; j < flight_control_names && slot[i] < 0; ++j) {
        if (!used[j] && control_[j].ino == static_cast<std::uint64_t>(sts[i].st_ino) &&
            control_[j].dev == static_cast<std::uint64_t>(sts[i].st_dev)) {
          slot[i] = static_cast<int>(j);
          used[j] = true;
        }
      }
    }
    for (unsigned i = 0; i < l.count; ++i) {
      for (unsigned j = 0; j < flight_control_names && slot[i] == -1; ++j) {
        if (used[j]) continue;
        slot[i] = static_cast<int>(j);
        used[j] = true;
        control_[j] = control_state{};  // a file not read before: from its start
      }
      if (slot[i] >= 0) poll_one(control_file(dir, l.files[i]), control_[slot[i]], sts[i]);
    }
  }

  LOTUS_DETAIL_COLD static text control_file(const char* dir,
                                             const flight_control_file& f) noexcept {
    text path;
    path.add(dir).add('/').add(f.name);
    return path;
  }

  LOTUS_DETAIL_COLD static void refuse_control(const text& path) noexcept {
    diag(topic::capture_control,
         "flight recorder: ignoring the control file '%s': not a regular file of this user with "
         "one link "
         "(requests of another user are never obeyed; this user's go to a private control "
         "file)",
         path.c_str());
  }

  /// Where the reading of one control file name stands.
  struct control_state {
    std::uint64_t ino = 0, dev = 0, off = 0;
  };
  /// This user's control files of the directory as last listed, and the directory then.
  struct control_listing {
    std::uint64_t dev = 0, ino = 0, mtime_ns = 0, listed_ns = 0;
    bool valid = false;
    unsigned count = 0;
    flight_control_file files[flight_control_names] = {};
  };

  LOTUS_DETAIL_COLD void poll_one(const text& path, control_state& c,
                                  const struct stat& st) noexcept {
    const auto ino = static_cast<std::uint64_t>(st.st_ino);
    const auto dev = static_cast<std::uint64_t>(st.st_dev);
    if (ino != c.ino || dev != c.dev || static_cast<std::uint64_t>(st.st_size) < c.off) {
      c.ino = ino;  // a new (or truncated) file: read from its start
      c.dev = dev;
      c.off = 0;
    }
    if (static_cast<std::uint64_t>(st.st_size) <= c.off) return;
    int fd = -1;
    do {
      fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) return;
    struct stat fst {};
    char buf[16384];
    ssize_t got = -1;
    if (::fstat(fd, &fst) == 0 && !flight_control_owned(fst)) {
      refuse_control(path);  // replaced since the lstat
    } else if (static_cast<std::uint64_t>(fst.st_ino) == ino &&
               static_cast<std::uint64_t>(fst.st_dev) == dev) {
      got = ::pread(fd, buf, sizeof buf, static_cast<off_t>(c.off));
    }
    ::close(fd);
    if (got <= 0) return;
    const auto n = static_cast<std::size_t>(got);
    std::size_t line_start = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (buf[i] != '\n') continue;
      take(std::string_view(buf + line_start, i - line_start));
      line_start = i + 1;
    }
    // A line longer than the buffer is no request: skipped whole.
    c.off += line_start != 0 ? line_start : n;
  }

  LOTUS_DETAIL_COLD void take(std::string_view line) noexcept {
    flight_request r;
    if (!flight_parse_request(line, r)) return;
    if (r.end_ns < started_ns_) return;  // ended before this process recorded
    const auto pid = static_cast<std::uint64_t>(::getpid());
    const auto ppid = static_cast<std::uint64_t>(::getppid());
    if (r.pid != 0 && r.pid != pid && r.pid != ppid) return;
    for (unsigned i = 0; i < pending_count_; ++i) {
      if (std::strcmp(pending_[i].id, r.id) == 0) return;
    }
    if (pending_count_ == flight_max_pending) {
      ++pending_skipped_;
      diag(topic::capture_pending,
           "flight recorder: %u captures pending (the most a process holds); capture %s and "
           "later ones beyond it are skipped, counted at exit",
           flight_max_pending, r.id);
      return;
    }
    pending_[pending_count_++] = r;
  }

  /// One `slot` per (thread, file) of a capture.
  struct capture_file {
    std::uint64_t tid;
    bool main;
    const char* name;
    file_slot slot;
  };
  /// Files of threads a part may gain while it stays open (their chunks beyond: not written).
  static constexpr std::size_t open_extra_files = 64;

  /// Sidecar lines of a capture's part, growing (writer thread, cold path).
  struct line_buf {
    char* p = nullptr;
    std::size_t n = 0, cap = 0;
    bool failed = false;
    void add(const char* s, std::size_t k) noexcept {
      if (failed || k == 0) return;
      if (n + k > cap) {
        std::size_t c = cap != 0 ? cap : 8192;
        while (c < n + k) c *= 2;
        char* q = static_cast<char*>(std::realloc(p, c));
        if (q == nullptr) {
          failed = true;
          return;
        }
        p = q;
        cap = c;
      }
      std::memcpy(p + n, s, k);
      n += k;
    }
    void add(const text& t) noexcept { add(t.c_str(), t.size()); }
    void release() noexcept {
      std::free(p);
      *this = line_buf{};
    }
  };

  /// This process's part of a capture whose stall was still going when it was written: its files
  /// stay open until the stall ends (or flight_complete_ns), then the part is completed.
  struct open_part {
    flight_request r;
    trace_files* out = nullptr;
    capture_file* slots = nullptr;
    std::size_t nslots = 0, cap = 0;
    std::uint64_t from = 0, written_to = 0;  // chunks stamped after written_to: not on disk yet
    std::uint64_t recorded = 0, written = 0, sanitized = 0;
    line_buf lines;             // its sidecar lines but the header and the closing ones
    std::uint64_t done_at = 0;  // the stall ended: completed at this time (0: still going)
  };

  /// A wait or a batch that began by `end`, read in progress at two cycles in a row: the stall a
  /// capture whose window ends at `end` holds is still going in this process.
  bool stalled_by(std::uint64_t end) const noexcept {
    for (std::size_t i = 0; i < inflight_count_; ++i) {
      const inflight_entry& e = inflight_[i];
      if (e.confirmed && e.what != inflight_entry::op && e.since_ns <= end) return true;
    }
    return false;
  }

  /// Writes the record chunks stamped at or after `from` and after `after` into `out`, a file
  /// per (thread, kind) in `slots` (at most `cap`), `thread` and `file` lines through `emit`,
  /// then the window's sidecar lines of those chunks. Returns the last chunk's stamp.
  LOTUS_DETAIL_COLD std::uint64_t write_chunks(trace_files& out, capture_file* slots,
                                               std::size_t& nslots, std::size_t cap,
                                               std::uint64_t from, std::uint64_t after,
                                               std::uint64_t& recorded, std::uint64_t& written,
                                               std::uint64_t& sanitized, text_sink emit) noexcept {
    std::uint64_t last = after;
    for (chunk* c = head_; c != nullptr; c = c->next) {
      if (c->stamp_ns < from || c->stamp_ns <= after) continue;
      if (c->stamp_ns > last) last = c->stamp_ns;
      if (c->kind == chunk_sidecar) continue;
      const bool main = c->kind == chunk_main;
      capture_file* f = nullptr;
      for (std::size_t i = 0; i < nslots && f == nullptr; ++i) {
        if (slots[i].tid == c->tid && slots[i].main == main) f = &slots[i];
      }
      recorded += c->lines;
      if (f == nullptr) {
        if (nslots == cap) continue;  // a part kept open gained more threads than it has room for
        f = &slots[nslots++];
        f->tid = c->tid;
        f->main = main;
        f->name = c->name;
        f->slot = file_slot{};
        bool named = false;  // one `thread` line per thread
        for (std::size_t i = 0; i + 1 < nslots; ++i) named = named || slots[i].tid == c->tid;
        if (!named) {
          text t;
          emit(t.add("thread ").add(c->tid).add(' ').add_value(c->name).add('\n'));
        }
      }
      const std::uint64_t done = out.write_slot(f->slot, c->tid, main, c->data, c->size, c->lines);
      written += done;
      if (done == c->lines) sanitized += c->sanitized;
      if (out.created_full()) emit(out.take_created());
    }
    if (out.created_pending()) emit(out.take_created());
    for (chunk* c = head_; c != nullptr; c = c->next) {
      if (c->stamp_ns < from || c->stamp_ns <= after || c->kind != chunk_sidecar) continue;
      // Whole lines only, each within the chunk: a line without its newline (never kept: the
      // writer keeps whole lines) or longer than a text is skipped, never cut or read past.
      std::size_t at = 0;
      while (at < c->size) {
        const void* nl = std::memchr(c->data + at, '\n', c->size - at);
        if (nl == nullptr) break;
        const auto end = static_cast<std::size_t>(static_cast<const char*>(nl) - c->data);
        text t;
        t.add(c->data + at, end - at + 1);
        if (!t.overflow) emit(t);
        at = end + 1;
      }
    }
    return last;
  }

  /// The closing lines of a part: what was still in progress (a stall longer than the capture is
  /// cut there, and these lines say where), then `capture` (window's end `end`) and `stats`.
  LOTUS_DETAIL_COLD void closing_lines(const flight_request& r, std::uint64_t from,
                                       std::uint64_t end, std::uint64_t recorded,
                                       std::uint64_t written, std::uint64_t sanitized,
                                       text_sink emit, text& cap) const noexcept {
    for (std::size_t i = 0; i < inflight_count_; ++i) {
      text t;
      if (inflight_line(i, t)) emit(t);
    }
    std::uint64_t dropped = 0;  // records the byte bound dropped from this window
    const unsigned ne = evicted_count_ < max_evictions ? evicted_count_ : max_evictions;
    for (unsigned i = 0; i < ne; ++i) {
      if (evicted_[i].stamp_ns >= from && evicted_[i].stamp_ns <= end) {
        dropped += evicted_[i].lines;
      }
    }
    cap.add("capture ").add(r.id).add(' ').add(r.trigger_ns).add(' ').add(from).add(' ');
    cap.add(end).add(' ').add(r.pid).add(' ').add_value(r.reason).add('\n');
    cap.add("stats ").add(recorded + dropped).add(' ').add(written).add(' ');
    cap.add(recorded + dropped - written).add(' ').add(sanitized).add('\n');
  }

  /// Writes this process's window of `r` into `<dir>/capture-<id>/`: trace files named as usual,
  /// then the sidecar, whose `capture` line comes last. When this process is still inside a wait
  /// or batch that began by the window's end, the part stays open (complete_parts).
  LOTUS_DETAIL_COLD void write_capture(trace_files& files, const text& header,
                                       const flight_request& r, bool final) noexcept {
    files.make_dir();
    // `capture-<id>`, or the next name when another user (or anything but a directory of this
    // user) took it: a planted name never skips a capture.
    text dir;
    int err = 0;
    if (!flight_capture_dir(files.dir().c_str(), r.id, dir, &err)) {
      diag(topic::capture_failed,
           "flight recorder: cannot create a directory for capture %s in '%s': %s; capture "
           "skipped",
           r.id, files.dir().c_str(), std::strerror(err));
      return;
    }
    if (std::strcmp(dir.c_str() + files.dir().size() + 9, r.id) != 0) {
      diag(topic::file_taken,
           "flight recorder: '%s/capture-%s' is not a directory of this user (another user's?); "
           "capture written into '%s'",
           files.dir().c_str(), r.id, dir.c_str());
    }
    const std::uint64_t from = window_from(r);
    std::size_t count = 0;
    for (chunk* c = head_; c != nullptr; c = c->next) count += c->stamp_ns >= from ? 1u : 0u;
    const bool stays_open = !final && open_count_ < flight_max_open && stalled_by(r.end_ns);
    const std::size_t cap = count + (stays_open ? open_extra_files : 0);
    capture_file* slots =
        static_cast<capture_file*>(std::calloc(cap != 0 ? cap : 1, sizeof(capture_file)));
    trace_files* out = new (std::nothrow) trace_files();
    open_part* part = stays_open ? new (std::nothrow) open_part() : nullptr;
    if (slots == nullptr || out == nullptr || (stays_open && part == nullptr)) {
      std::free(slots);
      delete out;
      delete part;
      diag(topic::no_memory, "flight recorder: out of memory writing a capture; skipped");
      return;
    }
    out->set_byte_counter(files.byte_counter());
    out->set_budget(files.max_bytes(), files.min_free());
    text prefix = dir;
    prefix.add('/').add(files.base());
    ptr_list<thread_state> none;
    out->start(std::string_view(prefix.c_str(), prefix.size()), none);
    // The header first: under LOTUS_MAX_BYTES the process's identity is the last thing to lose.
    out->write_sidecar(header, text());
    std::size_t nslots = 0;
    std::uint64_t recorded = 0, written = 0, sanitized = 0;
    text lines;
    // Sidecar lines, written 4000 bytes at a time; `kept`: the part keeps a copy (the closing
    // lines go apart from the kept ones: a completed part has its own).
    auto emitter = [&](bool kept) {
      return [&, kept](const text& more) {
        if (lines.size() + more.size() > 4000) {
          out->write_sidecar(header, lines);
          lines.clear();
        }
        lines.add(more);
        if (kept && part != nullptr) part->lines.add(more);
      };
    };
    const std::uint64_t last = write_chunks(*out, slots, nslots, cap, from, 0, recorded, written,
                                            sanitized, emitter(true));
    text closing;
    closing_lines(r, from, r.end_ns, recorded, written, sanitized, emitter(false), closing);
    if (!lines.empty()) out->write_sidecar(header, lines);
    // The closing lines on their own, from the budget's reserve for the `stats` line if need be.
    out->write_sidecar(header, closing, true);
    if (part == nullptr) {
      out->close_all(none);
      delete out;
      std::free(slots);
      return;
    }
    part->r = r;
    part->out = out;
    part->slots = slots;
    part->nslots = nslots;
    part->cap = cap;
    part->from = from;
    part->written_to = last;
    part->recorded = recorded;
    part->written = written;
    part->sanitized = sanitized;
    open_[open_count_++] = part;
  }

  /// The open parts whose stall ended (a margin ago: its last records drained), or that waited
  /// flight_complete_ns past their window, or all of them at `final`: each is completed (the
  /// records since, appended; the sidecar replaced whole, its window ending now) and closed.
  template <class Header>
  LOTUS_DETAIL_COLD void complete_parts(trace_files& files, Header&& header, std::uint64_t now,
                                        bool final) noexcept {
    for (unsigned i = 0; i < open_count_;) {
      open_part& p = *open_[i];
      if (!final && now < p.r.end_ns + flight_complete_ns) {
        if (stalled_by(p.r.end_ns)) {
          p.done_at = 0;
          ++i;
          continue;
        }
        if (p.done_at == 0) p.done_at = now + set_.margin_ns;
        if (now < p.done_at) {
          ++i;
          continue;
        }
      }
      complete_part(files, header(), p, now);
      close_part(p);
      open_[i] = open_[--open_count_];
    }
  }

  LOTUS_DETAIL_COLD void complete_part(trace_files& files, const text& header, open_part& p,
                                       std::uint64_t now) noexcept {
    auto emit = [&](const text& more) { p.lines.add(more); };
    write_chunks(*p.out, p.slots, p.nslots, p.cap, p.from, p.written_to, p.recorded, p.written,
                 p.sanitized, emit);
    line_buf all;
    all.add(header);
    all.add(p.lines.p, p.lines.n);
    text closing;
    closing_lines(
        p.r, p.from, now, p.recorded, p.written, p.sanitized,
        [&](const text& more) { all.add(more); }, closing);
    all.add(closing);
    text side, tmp;
    if (all.failed || !p.out->sidecar_path(side)) {
      all.release();
      return;  // the part stays as first written
    }
    if (!files.charge(all.n)) {
      diag(topic::capture_budget,
           "flight recorder: capture %s not completed (LOTUS_MAX_BYTES reached): its parts "
           "stay cut where their window ended",
           p.r.id);
      all.release();
      return;
    }
    // The new sidecar under a name no reader takes for one, then renamed over the old: a reader
    // sees the part cut or whole, never half-written.
    const std::size_t slash = std::string_view(side.c_str(), side.size()).rfind('/');
    tmp.add(side.c_str(), slash + 1)
        .add(".lotus-part-")
        .add(static_cast<std::uint64_t>(::getpid()));
    tmp.add(".tmp");
    int fd = -1;
    for (int attempt = 0; attempt < 2 && fd < 0 && !tmp.overflow; ++attempt) {
      fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd < 0 && errno == EEXIST) ::unlink(tmp.c_str());  // a crashed earlier try's
    }
    bool ok = fd >= 0;
    for (std::size_t at = 0; ok && at < all.n;) {
      const ssize_t k = ::write(fd, all.p + at, all.n - at);
      if (k < 0 && errno == EINTR) continue;
      ok = k > 0;
      if (ok) at += static_cast<std::size_t>(k);
    }
    if (fd >= 0) ::close(fd);
    if (ok) ok = ::rename(tmp.c_str(), side.c_str()) == 0;
    if (!ok) {
      const int e = errno;
      if (fd >= 0) ::unlink(tmp.c_str());
      diag(topic::capture_failed,
           "flight recorder: capture %s not completed: cannot replace '%s': %s; it stays cut "
           "where its window ended",
           p.r.id, side.c_str(), std::strerror(e));
    }
    all.release();
  }

  LOTUS_DETAIL_COLD void close_part(open_part& p) noexcept {
    ptr_list<thread_state> none;
    p.out->close_all(none);
    delete p.out;
    std::free(p.slots);
    p.lines.release();
    delete &p;
  }

  struct eviction {
    std::uint64_t stamp_ns, lines;
  };

  flight_settings set_;
  chunk* head_ = nullptr;  // oldest
  chunk* tail_ = nullptr;
  std::uint64_t held_ = 0;  // bytes of the chunks, headers included
  eviction evicted_[max_evictions] = {};
  unsigned evicted_count_ = 0;
  std::uint64_t started_ns_ = 0;  // flight mode began (requests ending before are ignored)
  std::uint64_t holdoff_ns_ = 0, holdoff_until_ = 0;
  std::uint64_t seq_ = 0;
  unsigned auto_count_ = 0;  // automatic captures asked for (flight_max_auto)
  bool auto_capped_ = false;
  bool wait_fired_ = false;
  std::uint64_t wait_idx_ = 0, wait_dur_ = 0, wait_start_ = 0;
  const inflight_entry* inflight_ = nullptr;  // the writer's scan of this cycle (in_progress)
  std::size_t inflight_count_ = 0;
  wait_span waits_[max_waits] = {};
  unsigned waits_count_ = 0;
  flight_request asks_[max_asks];
  unsigned asks_count_ = 0;
  flight_request pending_[flight_max_pending];
  unsigned pending_count_ = 0;
  control_state control_[flight_control_names];
  control_listing listing_;
  std::uint64_t pending_skipped_ = 0;  // requests skipped: flight_max_pending were pending
  open_part* open_[flight_max_open] = {};
  unsigned open_count_ = 0;

  /// Open parts dropped as they are (a new directory; a forked child, whose parent completes
  /// them).
  LOTUS_DETAIL_COLD void drop_parts() noexcept {
    for (unsigned i = 0; i < open_count_; ++i) close_part(*open_[i]);
    open_count_ = 0;
  }
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
