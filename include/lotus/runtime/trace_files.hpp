// lotus — trace files and the sidecar (internal)
// SPDX-License-Identifier: MIT
// Safe creation, a bounded fd cache, whole-line writes.
#pragma once

#include <errno.h>        // errno, EEXIST, EINTR, ENOSPC, EMFILE
#include <fcntl.h>        // open, O_*
#include <sys/stat.h>     // fstat, lstat, mkdir
#include <sys/statvfs.h>  // statvfs
#include <unistd.h>       // write, close, ftruncate, geteuid

#include <cstdint>      // uint64_t
#include <cstdio>       // snprintf
#include <cstdlib>      // calloc, free
#include <cstring>      // strerror
#include <string_view>  // string_view

#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"
#include "lotus/detail/clock.hpp"
#include "lotus/detail/name_cache.hpp"
#include "lotus/runtime/diagnostics.hpp"
#include "lotus/runtime/text.hpp"
#include "lotus/runtime/threads.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// How many trace files lotus keeps open at once, whatever the number of threads (plus the
/// sidecar): a host near its RLIMIT_NOFILE keeps its descriptors.
constexpr std::size_t max_open_trace_files = 60;
/// Bytes of LOTUS_MAX_BYTES (at most a quarter of it) kept for the sidecar's exit `stats` line, so
/// the loss counters reach the disk even when records used the rest of the budget.
constexpr std::uint64_t sidecar_stats_reserve = 256;
/// Fresh names tried when a file name is taken: `_r1_` … `_r64_`.
constexpr unsigned max_fresh_names = 64;

/// This process's start time (clock ticks since boot, /proc/self/stat field 22): with the pid,
/// it tells this process's sidecar from one of an earlier process with the same pid. 0: unknown.
LOTUS_DETAIL_COLD inline std::uint64_t process_start() noexcept {
  char buf[1024];
  int fd = -1;
  do {
    fd = ::open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return 0;
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');  // the command name may hold spaces and ')'
  if (p == nullptr) return 0;
  for (int field = 2; field < 22 && *p != '\0'; ++p) field += *p == ' ' ? 1 : 0;
  std::uint64_t v = 0;
  for (; *p >= '0' && *p <= '9'; ++p) v = v * 10 + static_cast<std::uint64_t>(*p - '0');
  return v;
}

/// Every trace file and sidecar of one process, written by the writer thread only.
///
/// Rules (tools/docs/RUNTIME.md, "File creation"): a file is only ever *created*, with
/// O_CREAT|O_EXCL|O_NOFOLLOW|O_NONBLOCK, so lotus never follows a symlink, never opens a FIFO or
/// device, and never appends to a file it did not create in this run. A taken name gets the next
/// fresh name, with `r<k>_` before the id so Lotus's scripts and lotus-tool still group it with its
/// thread. A file the fd cache closed is reopened with O_NOFOLLOW and must still be the same inode,
/// a regular file of this user with one link; otherwise it is refused and its events are counted as
/// dropped.
class trace_files {
 public:
  /// New prefix (absolute): files of the old one are closed; nothing is created yet.
  LOTUS_DETAIL_COLD void start(std::string_view prefix, ptr_list<thread_state>& threads) noexcept {
    close_all(threads, /*keep_known=*/true);
    prefix_id_ = prefix_id_of(prefix);
    const std::size_t slash = prefix.rfind('/');
    prefix_ = text();
    dir_ = text();
    base_ = text();
    prefix_.add(prefix);
    if (slash != std::string_view::npos) {
      dir_.add(prefix.substr(0, slash == 0 ? 1 : slash));
      base_.add(prefix.substr(slash + 1));
    }
    dir_ready_ = false;
    disabled_ =
        prefix.empty() || slash == std::string_view::npos;  // resolved prefixes are absolute
  }

  bool disabled() const noexcept { return disabled_; }
  const text& base() const noexcept { return base_; }
  /// Files this process tried to create (any thread may read it).
  std::uint64_t creates() const noexcept { return creates_.load(mo_relaxed); }
  /// open(2) and write(2) calls returned so far, trace files and sidecar alike (any thread may
  /// read it): the writer's progress through a slow file system, one call at a time.
  std::uint64_t io_done() const noexcept { return io_done_.load(mo_relaxed); }

  /// The disk budget (settings: LOTUS_MAX_BYTES, LOTUS_MIN_FREE_BYTES); set from any thread.
  /// `max_bytes`: bytes this process may write, trace files and sidecar together (0: no limit).
  /// `min_free`: free bytes the trace directory's file system keeps (min_free_auto: the larger of
  /// 1 GiB and 5 % of it; 0: none). Records beyond either are dropped (counted), and so are
  /// sidecar lines (whole lines; sidecar_stats_reserve is kept for the exit `stats` line).
  static constexpr std::uint64_t min_free_auto = ~std::uint64_t{0};
  void set_budget(std::uint64_t max_bytes, std::uint64_t min_free) noexcept {
    max_bytes_.store(max_bytes, mo_relaxed);
    min_free_.store(min_free, mo_relaxed);
    budget_changed_.store(true, mo_relaxed);
  }

  /// LOTUS_MAX_BYTES is set.
  bool byte_limited() const noexcept { return max_bytes_.load(mo_relaxed) != 0; }

  /// The byte count this runtime shares with the process's other lotus runtimes (ledger.hpp);
  /// nullptr: its own. Writer thread only, before it writes.
  void set_byte_counter(atom<std::uint64_t>* shared) noexcept {
    atom<std::uint64_t>* to = shared != nullptr ? shared : &own_bytes_;
    if (to == bytes_) return;
    to->fetch_add(bytes_->exchange(0, mo_relaxed), mo_relaxed);
    bytes_ = to;
  }

  /// Closes every file (prefix change, fork child, shutdown). With `keep_known` (a prefix change)
  /// the files stay known under their prefix: configuring it again appends to them (they were
  /// created by this process) instead of taking fresh names.
  LOTUS_DETAIL_COLD void close_all(ptr_list<thread_state>& threads,
                                   bool keep_known = false) noexcept {
    for (thread_state* t : threads) {
      release(t->worker);
      release(t->main);
      if (keep_known) {
        if (t->worker.state == file_slot::created)
          remember(file_key(t->tid, kind_worker), t->worker);
        if (t->main.state == file_slot::created) remember(file_key(t->tid, kind_main), t->main);
      }
      t->worker = file_slot{};
      t->main = file_slot{};
      t->announced = false;
    }
    for (std::size_t i = 0; i < open_count_; ++i) {
      close_if_ours(*open_[i]);
    }
    open_count_ = 0;
    close_if_ours(sidecar_);
    if (keep_known && sidecar_.state == file_slot::created &&
        sidecar_pid_ == static_cast<std::uint64_t>(::getpid())) {
      remember(file_key(sidecar_pid_, kind_sidecar), sidecar_);
    }
    sidecar_ = file_slot{};
    sidecar_pid_ = 0;
    if (!keep_known) {
      known_.release();
      prefix_count_ = 0;
      prefix_id_ = no_prefix_id;
    }
  }

  /// A finished thread: its files are closed and leave the cache. They are remembered by thread id:
  /// the kernel reuses ids, and a later thread with the same id appends to the same files (they
  /// were created by this process in this run) instead of taking fresh names.
  LOTUS_DETAIL_COLD void forget(thread_state& t) noexcept {
    release(t.worker);
    release(t.main);
    if (t.worker.state == file_slot::created) remember(file_key(t.tid, kind_worker), t.worker);
    if (t.main.state == file_slot::created) remember(file_key(t.tid, kind_main), t.main);
  }

  /// Appends `n` bytes of whole lines to the thread's worker or main file. Returns how many of the
  /// `lines` are on disk; the rest are lost and reported (once per cause).
  std::uint64_t write(thread_state& t, bool main_file, const char* data, std::size_t n,
                      std::uint64_t lines) {
    return write_slot(main_file ? t.main : t.worker, t.tid, main_file, data, n, lines);
  }

  /// write() for a file slot of thread `tid` held elsewhere (a flight-recorder capture, whose
  /// threads may have exited); `s` must stay at its address until close_all().
  std::uint64_t write_slot(file_slot& s, std::uint64_t tid, bool main_file, const char* data,
                           std::size_t n, std::uint64_t lines) {
    if (disabled_ || s.state == file_slot::refused) return 0;
    if (s.state == file_slot::none) recall(file_key(tid, main_file ? kind_main : kind_worker), s);
    const int kind = main_file ? kind_main : kind_worker;
    if (s.fd >= 0 && !still_ours(s)) drop_fd(s);  // the host closed it: reopen by name, checked
    if (s.fd < 0 && !acquire(s, kind, tid)) return 0;
    s.last_use = ++clock_;
    return append_lines(s, data, n, lines, kind, tid);
  }

  /// The trace directory (the prefix up to its last '/'), and making it (as a first file would).
  const text& dir() const noexcept { return dir_; }
  void make_dir() noexcept { make_dirs(); }
  /// The budget's settings and the byte count it charges (a capture shares them).
  std::uint64_t max_bytes() const noexcept { return max_bytes_.load(mo_relaxed); }
  std::uint64_t min_free() const noexcept { return min_free_.load(mo_relaxed); }
  atom<std::uint64_t>* byte_counter() const noexcept { return bytes_; }

  /// `n` bytes lotus writes elsewhere (the flight recorder's control file), charged to the
  /// budget: false (nothing charged) when they do not fit.
  bool charge(std::size_t n) noexcept {
    const grant g = budget_take(n, false, true);
    const bool fits = g.bytes == n;
    budget_settle(g, fits ? n : 0);
    return fits;
  }

  /// Appends sidecar lines, creating `.<base>.lotus-meta_<pid>` first (with `header`) in a new
  /// process. Returns false when the sidecar cannot be written. `kept` (optional): the bytes of
  /// `lines` on disk, whole lines (the rest did not fit the budget or the disk).
  LOTUS_DETAIL_COLD bool write_sidecar(const text& header, const text& lines, bool final = false,
                                       std::size_t* kept = nullptr) noexcept {
    if (kept != nullptr) *kept = 0;
    if (disabled_) return false;
    const std::uint64_t pid = static_cast<std::uint64_t>(::getpid());
    if (sidecar_pid_ != pid) {
      close_if_ours(sidecar_);
      sidecar_ = file_slot{};
      sidecar_pid_ = pid;
      recall(file_key(pid, kind_sidecar), sidecar_);  // this prefix, configured before
    }
    if (sidecar_.state == file_slot::refused) return false;
    if (sidecar_.fd >= 0 && !still_ours(sidecar_)) drop_fd(sidecar_);
    // `lines`, after `head` (empty, or the header of a new sidecar): whole lines only.
    const auto put = [&](const text& head) {
      const text* data = &lines;
      std::uint64_t head_lines = 0;
      text all;
      if (!head.empty()) {
        all = head;
        all.add(lines);
        if (!all.overflow) {
          data = &all;
          head_lines = count_lines(head.c_str(), head.size());
        } else if (append_lines(sidecar_, head.c_str(), head.size(),
                                count_lines(head.c_str(), head.size()), kind_sidecar, pid,
                                final) == 0) {
          return false;  // too long together: the header on its own first
        }
      }
      const std::uint64_t k =
          append_lines(sidecar_, data->c_str(), data->size(),
                       count_lines(data->c_str(), data->size()), kind_sidecar, pid, final);
      if (kept != nullptr && k > head_lines) {
        *kept = line_bytes(lines.c_str(), lines.size(), k - head_lines);
      }
      return k != 0;
    };
    if (sidecar_.fd < 0 && sidecar_.state == file_slot::created) {
      if (!reopen(sidecar_, kind_sidecar, pid)) return false;
      return put(text());
    }
    if (sidecar_.fd < 0) {
      sidecar_adopted_ = false;
      if (!create(sidecar_, kind_sidecar, pid)) return false;
      if (sidecar_adopted_) return put(text());  // an earlier runtime of this process wrote it
      return put(header);
    }
    return put(text());
  }

  /// The sidecar's path once this process created it (a flight-recorder capture's part is
  /// replaced whole when the stall it holds ends); false before.
  LOTUS_DETAIL_COLD bool sidecar_path(text& out) const noexcept {
    if (sidecar_.state != file_slot::created ||
        sidecar_pid_ != static_cast<std::uint64_t>(::getpid())) {
      return false;
    }
    return path_of(out, sidecar_, kind_sidecar, sidecar_pid_);
  }

  static std::uint64_t count_lines(const char* p, std::size_t n) noexcept {
    std::uint64_t k = 0;
    for (std::size_t i = 0; i < n; ++i) k += p[i] == '\n' ? 1u : 0u;
    return k;
  }
  /// The bytes of the first `k` lines of `p`.
  static std::size_t line_bytes(const char* p, std::size_t n, std::uint64_t k) noexcept {
    std::size_t i = 0;
    for (; i < n && k != 0; ++i) k -= p[i] == '\n' ? 1u : 0u;
    return i;
  }

  /// `file <name>` lines for the trace files created since the last call (for the sidecar).
  text take_created() noexcept {
    text out = created_;
    created_ = text();
    created_overflow_ = false;
    return out;
  }
  bool created_pending() const noexcept { return !created_.empty(); }
  bool created_full() const noexcept { return created_overflow_; }

  /// The live file (live.hpp): `.<base>.lotus-live_<pid>` beside the sidecar.
  struct live_file {
    int fd = -1;
    std::uint64_t dev = 0, ino = 0;
    unsigned fresh = 0;
  };
  /// What the live file's name depends on (a new prefix: a new live file).
  std::string_view live_key() const noexcept { return {prefix_.c_str(), prefix_.size()}; }

  /// Creates the live file like every lotus file (O_EXCL|O_NOFOLLOW|O_NONBLOCK, a regular file of
  /// this user with one link; a taken name gets the next fresh name `r<k>_`) at `size` bytes,
  /// taken once from the byte budget (all or nothing). Under a LOTUS_MAX_BYTES smaller than 8 times
  /// `size` there is none (the budget is for the trace). False when it cannot be created (then
  /// one message, except for that small budget).
  /// `mine`: the live files this runtime made before (an earlier prefix configured again: its file
  /// is written again).
  LOTUS_DETAIL_COLD bool create_live(live_file& f, std::size_t size, const live_file* mine,
                                     std::size_t mine_count) noexcept {
    if (disabled_) return false;
    const std::uint64_t max = max_bytes_.load(mo_relaxed);
    if (max != 0 && max / 8 < size) return false;
    make_dirs();
    const grant g = budget_take(size, false, true);
    if (g.bytes < size) {  // the budget's and the reserve's own messages say enough
      budget_settle(g, 0);
      return false;
    }
    const auto pid = static_cast<std::uint64_t>(::getpid());
    text name;
    for (unsigned k = 0; k <= max_fresh_names; ++k) {
      name.clear();
      name.add(dir_).add("/.").add(base_).add(".lotus-live_");
      if (k != 0) name.add('r').add(std::uint64_t{k}).add('_');
      name.add(pid);
      if (name.overflow) break;
      int fd = -1;
      do {
        fd = ::open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
                    0644);
      } while (fd < 0 && errno == EINTR);
      if (fd < 0 && errno == EEXIST) {
        // An earlier lotus runtime of this very process (a library loaded again) made it: reuse.
        if (adopt_own_live(name.c_str(), size, f, k, mine, mine_count)) {
          budget_settle(g, 0);
          return true;
        }
        continue;
      }
      struct stat st {};
      if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
          ::ftruncate(fd, static_cast<off_t>(size)) != 0) {
        if (fd >= 0) ::close(fd);
        break;
      }
      f = live_file{fd, static_cast<std::uint64_t>(st.st_dev),
                    static_cast<std::uint64_t>(st.st_ino), k};
      budget_settle(g, size);
      return true;
    }
    budget_settle(g, 0);
    diag(topic::live, "cannot create the live figures file '%s': %s", name.c_str(),
         name.overflow ? "name too long" : std::strerror(errno));
    return false;
  }

  /// Opens `path` read-write (plus `extra_flags`; never following a link, never blocking) when
  /// it is a regular file of this user with one link, of `size` bytes (0: any), and reads its
  /// first bytes into `head` (NUL-terminated): the file an earlier runtime of this process may
  /// have left, for adopt_own_live and adopt_own_sidecar to recognize. -1 (nothing left open)
  /// when it is not such a file or holds nothing.
  LOTUS_DETAIL_COLD static int open_own_file(const char* path, int extra_flags, std::uint64_t size,
                                             struct stat& st, char (&head)[1024]) noexcept {
    int fd = -1;
    do {
      fd = ::open(path, O_RDWR | extra_flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) return -1;
    ssize_t n = -1;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
        st.st_nlink == 1 && (size == 0 || static_cast<std::uint64_t>(st.st_size) == size)) {
      n = ::pread(fd, head, sizeof head - 1, 0);
    }
    if (n <= 0) {
      ::close(fd);
      return -1;
    }
    head[n] = '\0';
    return fd;
  }

  /// `path` as this process's live file when an earlier runtime of this process wrote it and ended
  /// (its body names this pid and start, and is final), a regular file of this user with one link,
  /// `size` bytes. (Two runtimes alive at once each have a file; readers add them up.)
  LOTUS_DETAIL_COLD static bool adopt_own_live(const char* path, std::size_t size, live_file& f,
                                               unsigned fresh, const live_file* mine,
                                               std::size_t mine_count) noexcept {
    const std::uint64_t start = process_start();
    if (start == 0) return false;
    struct stat st {};
    char head[1024];
    const int fd = open_own_file(path, 0, size, st, head);
    if (fd < 0) return false;
    char want[96];
    std::snprintf(want, sizeof want, "\npid %d\nppid %d\nstart %llu\n",
                  static_cast<int>(::getpid()), static_cast<int>(::getppid()),
                  static_cast<unsigned long long>(start));
    bool made_here = false;
    for (std::size_t i = 0; i < mine_count; ++i) {
      made_here = made_here || (mine[i].dev == static_cast<std::uint64_t>(st.st_dev) &&
                                mine[i].ino == static_cast<std::uint64_t>(st.st_ino));
    }
    const bool ours = std::strncmp(head, "lotus-live 1 ", 13) == 0 &&
                      std::strstr(head, want) != nullptr &&
                      (made_here || std::strstr(head, "\nfinal 1\n") != nullptr);
    if (!ours) {
      ::close(fd);
      return false;
    }
    f = live_file{fd, static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
                  fresh};
    return true;
  }

  /// True when `f.fd` still is the live file (the host may have closed the descriptor and reused
  /// its number: then it is reopened by name, and must be the same inode). Never closes a
  /// descriptor that is not ours.
  LOTUS_DETAIL_COLD bool live_ours(live_file& f) noexcept {
    struct stat st {};
    if (f.fd >= 0 && ::fstat(f.fd, &st) == 0 && static_cast<std::uint64_t>(st.st_dev) == f.dev &&
        static_cast<std::uint64_t>(st.st_ino) == f.ino) {
      return true;
    }
    f.fd = -1;
    text name;
    name.add(dir_).add("/.").add(base_).add(".lotus-live_");
    if (f.fresh != 0) name.add('r').add(std::uint64_t{f.fresh}).add('_');
    name.add(static_cast<std::uint64_t>(::getpid()));
    int fd = -1;
    do {
      fd = ::open(name.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) return false;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
        static_cast<std::uint64_t>(st.st_dev) != f.dev ||
        static_cast<std::uint64_t>(st.st_ino) != f.ino) {
      ::close(fd);
      return false;
    }
    f.fd = fd;
    return true;
  }

  /// Closes the live file when its descriptor still is ours.
  static void close_live(live_file& f) noexcept {
    struct stat st {};
    if (f.fd >= 0 && ::fstat(f.fd, &st) == 0 && static_cast<std::uint64_t>(st.st_dev) == f.dev &&
        static_cast<std::uint64_t>(st.st_ino) == f.ino) {
      ::close(f.fd);
    }
    f.fd = -1;
  }

  /// True once this process's sidecar exists (a stats line then has somewhere to go).
  bool has_sidecar() const noexcept {
    return sidecar_.state == file_slot::created &&
           sidecar_pid_ == static_cast<std::uint64_t>(::getpid());
  }

 private:
  /// A file this process created, by (prefix, thread id, kind): a later thread with the same id
  /// (the kernel reuses them) or the same prefix configured again appends to it.
  struct known_file {
    std::uint64_t key;  // file_key(); 0 marks an empty slot
    file_slot slot;
    bool empty() const noexcept { return key == 0; }
    std::size_t hash() const noexcept {
      return static_cast<std::size_t>(key * 0x9E3779B97F4A7C15ull >> 20);
    }
  };

  static constexpr unsigned max_prefixes = 64;  // distinct prefixes remembered per process
  static constexpr unsigned no_prefix_id = ~0u;

  /// The index of `prefix` among the prefixes this process wrote, added when new; no_prefix_id
  /// beyond max_prefixes (files of those prefixes are not remembered: fresh names as before).
  unsigned prefix_id_of(std::string_view prefix) noexcept {
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a of the prefix (64 bits)
    for (const char c : prefix) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    for (unsigned i = 0; i < prefix_count_; ++i) {
      if (prefixes_[i] == h) return i;
    }
    if (prefix_count_ == max_prefixes) return no_prefix_id;
    prefixes_[prefix_count_] = h;
    return prefix_count_++;
  }

  /// id * 4 + kind in the low 40 bits (a thread id, or the pid for the sidecar), the prefix
  /// above; 0 when the prefix is not remembered.
  std::uint64_t file_key(std::uint64_t id, int kind) const noexcept {
    if (prefix_id_ == no_prefix_id) return 0;
    return (std::uint64_t{prefix_id_ + 1} << 40) |
           ((id * 4 + static_cast<std::uint64_t>(kind)) & ((std::uint64_t{1} << 40) - 1));
  }

  LOTUS_DETAIL_COLD void remember(std::uint64_t key, const file_slot& s) noexcept {
    if (key == 0) return;
    known_file* k = known_.find(known_file{key, {}}.hash(),
                                [key](const known_file& x) { return x.key == key; });
    // Out of memory: the next thread with this id takes a fresh name instead.
    if (k == nullptr && known_.reserve_one(256, std::size_t{1} << 24)) {
      k = known_.insert(known_file{key, s});
    }
    if (k != nullptr) {
      k->slot = s;
      k->slot.fd = -1;
    }
  }

  void recall(std::uint64_t key, file_slot& s) const noexcept {
    if (key == 0) return;
    if (const known_file* k = known_.find(known_file{key, {}}.hash(),
                                          [key](const known_file& x) { return x.key == key; })) {
      s = k->slot;
    }
  }

  enum : int { kind_worker, kind_main, kind_sidecar };

  /// The name of a worker or main trace file (`id` a thread id) or of the sidecar (`id` the pid),
  /// with its fresh-name tag; false when longer than a path may be.
  LOTUS_DETAIL_COLD bool path_of(text& out, const file_slot& s, int kind,
                                 std::uint64_t id) const noexcept {
    out.clear();
    if (kind == kind_sidecar) {
      out.add(dir_).add("/.").add(base_).add(".lotus-meta_");
    } else {
      out.add(prefix_).add(kind == kind_main ? "_main_pid_" : "_worker_pid_");
    }
    if (s.fresh != 0) out.add('r').add(std::uint64_t{s.fresh}).add('_');
    out.add(id);
    return !out.overflow;
  }

  LOTUS_DETAIL_COLD static const char* describe(const char* path, char* buf,
                                                std::size_t size) noexcept {
    struct stat st {};
    if (::lstat(path, &st) != 0) return "it vanished";
    if (S_ISLNK(st.st_mode)) return "a symbolic link";
    if (S_ISFIFO(st.st_mode)) return "a FIFO";
    if (S_ISDIR(st.st_mode)) return "a directory";
    if (!S_ISREG(st.st_mode)) return "a device or socket";
    if (st.st_uid == ::geteuid()) return "a file of this user, from an earlier run or process";
    std::snprintf(buf, size, "a file owned by uid %u", static_cast<unsigned>(st.st_uid));
    return buf;
  }

  LOTUS_DETAIL_COLD void make_dirs() noexcept {
    if (dir_ready_) return;
    dir_ready_ = true;
    text part = dir_;
    for (std::size_t i = 1; i <= dir_.size(); ++i) {
      if (i == dir_.size() || dir_.c_str()[i] == '/') {
        part.resize(i);
        ::mkdir(part.c_str(), 0777);
        part = dir_;
      }
    }
  }

  /// Room in the fd cache for one more file: closes the least recently used one.
  void make_room() noexcept {
    if (open_count_ < max_open_trace_files) return;
    std::size_t victim = 0;
    for (std::size_t i = 1; i < open_count_; ++i) {
      if (open_[i]->last_use < open_[victim]->last_use) victim = i;
    }
    close_if_ours(*open_[victim]);
    open_[victim] = open_[--open_count_];
  }

  void release(file_slot& s) noexcept {
    if (s.fd < 0) return;
    uncache(s);
    close_if_ours(s);
  }

  void uncache(file_slot& s) noexcept {
    for (std::size_t i = 0; i < open_count_; ++i) {
      if (open_[i] == &s) {
        open_[i] = open_[--open_count_];
        break;
      }
    }
  }

  /// True when `s.fd` still is the file lotus created (same device and inode). The host may close
  /// any descriptor (daemonizing code, close_range(3, ~0U)) and open its own file, which then
  /// gets the same number: lotus must never write into it, nor close it. One fstat() per write
  /// of a buffer (a few hundred kilobytes at most), on the writer thread only; the window between
  /// this check and the write(2) is the only one left (tools/docs/RUNTIME.md).
  bool still_ours(const file_slot& s) const noexcept {
    struct stat st {};
    return ::fstat(s.fd, &st) == 0 && static_cast<std::uint64_t>(st.st_dev) == s.dev &&
           static_cast<std::uint64_t>(st.st_ino) == s.ino;
  }

  /// Forgets a descriptor that is not ours any more, without closing it (the number may be the
  /// host's now). The file is reopened by name, with the identity checks of reopen().
  LOTUS_DETAIL_COLD void drop_fd(file_slot& s) noexcept {
    uncache(s);
    s.fd = -1;
    diag(topic::fd_reused,
         "a trace file descriptor of lotus was closed by the program (and maybe reused for another "
         "file); lotus never writes into it: the trace file is reopened by name");
  }

  /// close(2), only when the descriptor still is ours.
  void close_if_ours(file_slot& s) noexcept {
    if (s.fd >= 0 && still_ours(s)) ::close(s.fd);
    s.fd = -1;
  }

  /// Hands our descriptors back when the process ran out of them.
  LOTUS_DETAIL_COLD void shed() noexcept {
    for (std::size_t i = 0; i < open_count_; ++i) close_if_ours(*open_[i]);
    open_count_ = 0;
  }

  /// EMFILE, ENOSPC and the like are transient: report once, drop, retry later. Anything else
  /// about the directory (EACCES, EROFS, ENOENT, ...) turns tracing off for this process.
  LOTUS_DETAIL_COLD void open_failed(const char* path, int err, const char* verb) noexcept {
    if (err == EMFILE || err == ENFILE) {
      shed();
      diag(
          topic::too_many_files,
          "cannot %s trace file '%s': %s; its events are dropped (counted) and it is retried later",
          verb, path, std::strerror(err));
    } else if (err == ENOSPC || err == EDQUOT) {
      diag(topic::no_space, "cannot %s trace file '%s': %s; its events are dropped (counted)", verb,
           path, std::strerror(err));
    } else {
      diag(topic::io_error, "cannot %s trace file '%s': %s; tracing disabled for this process",
           verb, path, std::strerror(err));
      disabled_ = true;
      g_mode.store(mode_off, mo_relaxed);
    }
  }

  /// Adopts `path` as this process's sidecar when an earlier runtime of this process wrote it
  /// (its header has this pid and `start` line), it is a regular file of this user with one
  /// link, and it can be opened for appending as the same inode.
  LOTUS_DETAIL_COLD bool adopt_own_sidecar(const char* path, file_slot& s) noexcept {
    const std::uint64_t start = process_start();
    if (start == 0) return false;
    struct stat st {};
    char head[1024];
    // Read-write: the header is read from the very inode that is then appended to.
    const int fd = open_own_file(path, O_APPEND, 0, st, head);
    if (fd < 0) return false;
    char want[96];
    std::snprintf(want, sizeof want, "\npid %d\n", static_cast<int>(::getpid()));
    char want_start[64];
    std::snprintf(want_start, sizeof want_start, "\nstart %llu\n",
                  static_cast<unsigned long long>(start));
    const bool ours = std::strncmp(head, "lotus-meta 1\n", 13) == 0 &&
                      std::strstr(head, want) != nullptr &&
                      std::strstr(head, want_start) != nullptr;
    if (!ours) {
      ::close(fd);
      return false;
    }
    s.fd = fd;
    s.state = file_slot::created;
    s.dev = static_cast<std::uint64_t>(st.st_dev);
    s.ino = static_cast<std::uint64_t>(st.st_ino);
    s.size = static_cast<std::uint64_t>(st.st_size);
    sidecar_adopted_ = true;
    return true;
  }

  LOTUS_DETAIL_COLD bool create(file_slot& s, int kind, std::uint64_t id) noexcept {
    creates_.fetch_add(1, mo_relaxed);
    make_dirs();
    text taken, name;
    for (unsigned k = s.fresh; k <= max_fresh_names; ++k) {
      s.fresh = k;
      const bool fits = path_of(name, s, kind, id);
      const char* const path = name.c_str();
      if (!fits) {
        open_failed(path, ENAMETOOLONG, "create");
        return false;
      }
      int fd = -1;
      do {
        fd = ::open(path,
                    O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
                    0644);
      } while (fd < 0 && errno == EINTR);
      io_done_.fetch_add(1, mo_relaxed);
      if (fd >= 0) {
        struct stat st {};
        ::fstat(fd, &st);
        s.fd = fd;
        s.state = file_slot::created;
        s.dev = static_cast<std::uint64_t>(st.st_dev);
        s.ino = static_cast<std::uint64_t>(st.st_ino);
        s.size = 0;
        if (&s != &sidecar_) {  // the sidecar lists the trace files this process created
          const char* base = path + dir_.size() + 1;
          if (created_.size() > 3500) created_overflow_ = true;  // written once per cycle
          created_.add("file ").add(base).add('\n');
        }
        if (!taken.empty()) {
          char buf[64];
          diag(topic::file_taken, "trace file '%s' already exists (%s); writing to '%s' instead",
               taken.c_str(), describe(taken.c_str(), buf, sizeof buf), path);
        }
        return true;
      }
      const int err = errno;
      if (err != EEXIST) {
        s.fresh = k;  // retried from here
        open_failed(path, err, "create");
        return false;
      }
      // Another runtime of this same process (a library loaded again after dlclose) made this
      // sidecar: append to it rather than use up fresh names.
      if (kind == kind_sidecar && adopt_own_sidecar(path, s)) return true;
      if (taken.empty()) taken = name;
    }
    s.state = file_slot::refused;
    diag(topic::file_refused,
         "cannot create a trace file: '%s' and its %u fresh names are taken; its events are "
         "dropped (counted)",
         taken.c_str(), max_fresh_names);
    return false;
  }

  /// An fd for `s`: created on first use, reopened (and checked) after the cache closed it.
  LOTUS_DETAIL_COLD bool acquire(file_slot& s, int kind, std::uint64_t id) noexcept {
    make_room();
    if (s.state == file_slot::none) {
      if (!create(s, kind, id)) return false;
    } else if (!reopen(s, kind, id)) {
      return false;
    }
    open_[open_count_++] = &s;
    return true;
  }

  /// Reopens a file this process created (`s` holds its identity). False when it cannot be
  /// opened now (EMFILE: retried later), or was removed, replaced or linked since: then it is
  /// refused, with one message.
  LOTUS_DETAIL_COLD bool reopen(file_slot& s, int kind, std::uint64_t id) noexcept {
    text name;
    path_of(name, s, kind, id);  // it fit when the file was created
    const char* const path = name.c_str();
    int fd = -1;
    do {
      fd = ::open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    io_done_.fetch_add(1, mo_relaxed);
    struct stat st {};
    const bool same = fd >= 0 && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                      st.st_uid == ::geteuid() && st.st_nlink == 1 &&
                      static_cast<std::uint64_t>(st.st_dev) == s.dev &&
                      static_cast<std::uint64_t>(st.st_ino) == s.ino;
    if (!same) {
      const int err = errno;
      if (fd >= 0) ::close(fd);
      if (fd < 0 && (err == EMFILE || err == ENFILE)) {
        open_failed(path, err, "reopen");
        return false;
      }
      s.state = file_slot::refused;
      diag(topic::file_refused,
           "trace file '%s' was removed, replaced or linked since lotus created it; it is not "
           "written again and its events are dropped (counted)",
           path);
      return false;
    }
    s.fd = fd;
    return true;
  }

  /// write(2) of whole lines, within the byte budget and the disk reserve (trace files and sidecar
  /// alike). A failed or short write (full disk) is cut back to the last whole line, so a file
  /// never ends in a partial record; returns the lines on disk. `final`: the exit `stats` line,
  /// which may use the budget's stats reserve.
  std::uint64_t append_lines(file_slot& s, const char* data, std::size_t n, std::uint64_t lines,
                             int kind, std::uint64_t id, bool final = false) noexcept {
    const grant g = budget_take(n, final, kind == kind_sidecar);
    if (g.bytes < n) {  // the whole lines that fit; the rest are dropped (counted by the caller)
      std::size_t keep = g.bytes;
      while (keep > 0 && data[keep - 1] != '\n') --keep;
      std::uint64_t kept = 0;
      for (std::size_t i = 0; i < keep; ++i) kept += data[i] == '\n' ? 1u : 0u;
      if (keep == 0) {
        budget_settle(g, 0);
        return 0;
      }
      n = keep;
      lines = kept;
    }
    if (append_all(s, data, n)) {
      budget_settle(g, n);
      return lines;
    }
    const std::uint64_t size0 = s.size;
    const std::uint64_t kept = cut_to_lines(s, data, lines, kind, id);
    budget_settle(g, static_cast<std::size_t>(s.size - size0));
    return kept;
  }

  /// Bytes the budget handed out for one write; `counted`: taken from the process's byte count
  /// (a limit was set), to be settled once the write is done.
  struct grant {
    std::size_t bytes;
    bool counted;
  };

  /// The room in the budget for `n` bytes now. Every file lotus writes shares one count per
  /// process (bytes_, see set_byte_counter), so the limit holds for trace files and sidecar
  /// together; sidecar_stats_reserve of it is left for the exit `stats` line (`final`).
  grant budget_take(std::size_t n, bool final, bool sidecar) noexcept {
    grant g{n, false};
    const std::uint64_t max = max_bytes_.load(mo_relaxed);
    if (max != 0) {
      const std::uint64_t reserve =
          final ? 0 : (max / 4 < sidecar_stats_reserve ? max / 4 : sidecar_stats_reserve);
      const std::uint64_t limit = max - reserve;
      std::uint64_t used = bytes_->load(mo_relaxed);
      std::uint64_t take = 0;
      do {
        const std::uint64_t left = used >= limit ? 0 : limit - used;
        take = left < n ? left : n;
      } while (take != 0 && !bytes_->compare_exchange_weak(used, used + take, mo_relaxed));
      g = grant{static_cast<std::size_t>(take), true};
      if (take < n && !sidecar) {
        diag(topic::max_bytes,
             "the trace reached LOTUS_MAX_BYTES=%llu bytes in this process (trace files and "
             "sidecar together); further events are dropped (counted)",
             static_cast<unsigned long long>(max));
      }
    }
    if (g.bytes > 0) {
      const std::size_t room = space_allows(g.bytes);
      if (room < g.bytes) {
        if (g.counted) bytes_->fetch_sub(g.bytes - room, mo_relaxed);
        g.bytes = room;
      }
    }
    return g;
  }

  /// `done` of the granted bytes reached the file: the rest goes back to the budget.
  void budget_settle(const grant& g, std::size_t done) noexcept {
    if (g.counted) {
      if (done < g.bytes) bytes_->fetch_sub(g.bytes - done, mo_relaxed);
    } else {
      bytes_->fetch_add(done, mo_relaxed);
    }
    local_bytes_ += done;
  }

  /// How many of `n` bytes can be written keeping the file system's reserve. statvfs() again
  /// after half of the room left at the last check is written (at most 4 MiB), so the reserve
  /// holds between checks, and at most once a second once the reserve is reached.
  LOTUS_DETAIL_COLD std::size_t space_allows(std::size_t n) noexcept {
    const std::uint64_t reserve_setting = min_free_.load(mo_relaxed);
    if (budget_changed_.exchange(false, mo_relaxed)) space_checked_ = false;
    if (reserve_setting == 0) return n;
    const std::uint64_t now = clock_ns(CLOCK_MONOTONIC);
    if (space_checked_) {
      if (space_low_ && now - space_checked_at_ < 1000000000u) return 0;
      if (!space_low_ && local_bytes_ + n <= space_next_check_) return n;
    }
    struct statvfs fs {};
    space_checked_ = true;
    space_checked_at_ = now;
    if (::statvfs(dir_.c_str(), &fs) != 0) {  // cannot tell: write (ENOSPC is still counted)
      space_low_ = false;
      space_next_check_ = local_bytes_ + (4u << 20);
      return n;
    }
    const std::uint64_t unit = fs.f_frsize != 0 ? fs.f_frsize : fs.f_bsize;
    const std::uint64_t avail = static_cast<std::uint64_t>(fs.f_bavail) * unit;
    const std::uint64_t size = static_cast<std::uint64_t>(fs.f_blocks) * unit;
    std::uint64_t reserve = reserve_setting;
    if (reserve == min_free_auto) {  // the larger of 1 GiB and 5 %; 5 % of a smaller one
      reserve = size / 20 > (std::uint64_t{1} << 30) ? size / 20 : (std::uint64_t{1} << 30);
      if (reserve >= size) reserve = size / 20;
    }
    // Files take whole blocks: 8 blocks of slack.
    const std::uint64_t keep = reserve + 8 * unit;
    const std::uint64_t room = avail > keep ? avail - keep : 0;
    space_low_ = room < n;  // what fits is written; then nothing until a check finds room
    const std::uint64_t step = room / 2 < (4u << 20) ? room / 2 : (4u << 20);
    space_next_check_ = local_bytes_ + (step > n ? step : n);
    if (space_low_) {
      diag(topic::disk_reserve,
           "the trace directory's file system has %llu KiB free, the %llu KiB lotus leaves free "
           "(LOTUS_MIN_FREE_BYTES); events are dropped (counted) until space is freed",
           static_cast<unsigned long long>(avail >> 10),
           static_cast<unsigned long long>(reserve >> 10));
      return static_cast<std::size_t>(room);
    }
    return n;
  }

  /// The common case: every byte written. Otherwise `failed_*` describe how far it got.
  bool append_all(file_slot& s, const char* data, std::size_t n) noexcept {
    std::size_t done = 0;
    while (done < n) {
      const ssize_t w = ::write(s.fd, data + done, n - done);
      io_done_.fetch_add(1, mo_relaxed);
      if (w > 0) {
        done += static_cast<std::size_t>(w);
      } else if (w < 0 && errno == EINTR) {
        continue;
      } else {
        failed_done_ = done;
        failed_errno_ = w < 0 ? errno : ENOSPC;
        return false;
      }
    }
    s.size += n;
    return true;
  }

  /// After a failed append: cut the file back to its last whole line; the lines kept are on disk.
  LOTUS_DETAIL_COLD std::uint64_t cut_to_lines(file_slot& s, const char* data, std::uint64_t lines,
                                               int kind, std::uint64_t id) noexcept {
    const std::size_t done = failed_done_;
    const int err = failed_errno_;
    std::size_t keep = done;
    while (keep > 0 && data[keep - 1] != '\n') --keep;
    if (keep != done) {
      const int rc = ::ftruncate(s.fd, static_cast<off_t>(s.size + keep));
      static_cast<void>(rc);
    }
    s.size += keep;
    std::uint64_t kept = 0;
    for (std::size_t i = 0; i < keep; ++i) kept += data[i] == '\n' ? 1u : 0u;
    text name;
    path_of(name, s, kind, id);
    const char* const path = name.c_str();
    if (err == ENOSPC || err == EDQUOT) {
      diag(topic::no_space,
           "cannot write trace file '%s': %s; events that do not fit are dropped (counted), a "
           "file never ends in a partial line",
           path, std::strerror(err));
    } else {
      diag(topic::io_error, "cannot write trace file '%s': %s; its events are dropped (counted)",
           path, std::strerror(err));
    }
    return kept < lines ? kept : lines;
  }

  text prefix_, dir_, base_;
  bool dir_ready_ = false;
  bool disabled_ = false;
  file_slot* open_[max_open_trace_files] = {};
  std::size_t open_count_ = 0;
  std::uint64_t clock_ = 0;
  file_slot sidecar_;
  std::uint64_t sidecar_pid_ = 0;
  probe_table<known_file> known_;              // files of exited threads and earlier prefixes
  std::uint64_t prefixes_[max_prefixes] = {};  // hashes of known_'s prefixes (prefix_id_of)
  unsigned prefix_count_ = 0;
  unsigned prefix_id_ = no_prefix_id;
  text created_;  // `file <name>` lines not yet in the sidecar
  bool created_overflow_ = false;
  std::size_t failed_done_ = 0;  // bytes of the last failed append that did reach the file
  atom<std::uint64_t> max_bytes_{0};
  atom<std::uint64_t> min_free_{min_free_auto};
  atom<bool> budget_changed_{false};
  atom<std::uint64_t> creates_{0};
  atom<std::uint64_t> io_done_{0};  // open(2) and write(2) calls returned (io_done)
  bool sidecar_adopted_ = false;
  std::uint64_t local_bytes_ = 0;  // bytes this runtime wrote (for the statvfs schedule)
  atom<std::uint64_t> own_bytes_{0};
  atom<std::uint64_t>* bytes_ = &own_bytes_;  // bytes written: the process's one count
  bool space_checked_ = false, space_low_ = false;
  std::uint64_t space_checked_at_ = 0, space_next_check_ = 0;
  int failed_errno_ = 0;
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
