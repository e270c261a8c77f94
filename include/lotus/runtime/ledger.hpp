// lotus — the process ledger: the byte budget and counters every lotus runtime shares (internal)
// SPDX-License-Identifier: MIT
//
// A process may hold several lotus runtimes: the program's own (its implementation file, or
// lotus::lotus) and each shared object that compiles lotus with hidden visibility
// (liblotus_nvtx.so, a plugin, a Python extension). They share no symbol, yet LOTUS_MAX_BYTES is a
// limit per process and the sidecar's `stats` line (the last one counts) must be the process's
// totals. They meet in a *ledger*: a small memfd mapping named `lotus-ledger-v1`, found by its name
// in /proc/self/maps.
// - Finding or creating it happens inside dl_iterate_phdr(), whose callback runs under the dynamic
//   loader's lock: the one lock every copy of lotus in the process shares, so two runtimes
//   starting at once agree on one ledger. The mapping is private (MAP_PRIVATE): a forked child
//   gets a copy, sees another pid in it and takes it over (its counts zeroed, its pid the
//   child's). A runtime that joined the ledger before the fork goes to its copy directly, without
//   reading /proc/self/maps (2,000 mappings in a torch process: ~2 ms of a DataLoader worker's
//   start).
// - No environment variable is written (setenv races with other threads' getenv) and no symbol
//   needs exporting. Where /proc or memfd_create is missing, each runtime keeps its own counts,
//   as before (documented in tools/docs/RUNTIME.md).
#pragma once

#include <errno.h>     // errno
#include <fcntl.h>     // open
#include <link.h>      // dl_iterate_phdr
#include <sys/mman.h>  // memfd_create, mmap
#include <unistd.h>    // read, close, ftruncate, getpid

#include <cstddef>  // size_t
#include <cstdint>  // uint64_t
#include <cstring>  // memcmp

#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"
#include "lotus/options.hpp"
#include "lotus/runtime/fork_gate.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// The counters one runtime publishes: its own trace_stats (monotonic totals).
struct ledger_slot {
  atom<std::uint64_t> recorded{0}, written{0}, dropped{0}, sanitized{0};
};

/// Runtimes a ledger has room for (a plugin loaded 500 times); later ones keep their own counts.
constexpr std::uint32_t ledger_slots = 500;

struct process_ledger {
  static constexpr std::uint64_t magic_v1 = 0x3176676c73756f6cull;  // "lotuslgv1" (8 bytes)
  std::uint64_t magic;
  std::uint64_t size;              // sizeof(process_ledger) of the lotus that made it
  std::int64_t pid;                // the process it belongs to (a forked child has a copy)
  atom<std::uint64_t> bytes;       // bytes every runtime of the process wrote (the budget)
  atom<std::uint32_t> slots_used;  // slots handed out
  std::uint32_t reserved;
  ledger_slot slots[ledger_slots];
};

inline constexpr char ledger_name[] = "lotus-ledger-v1";

/// The ledger this copy of lotus last joined: in a forked child, the address of its copy of the
/// parent's (mappings survive fork), to take over without reading /proc/self/maps.
inline process_ledger* g_ledger_joined = nullptr;

/// A ledger of the right layout (magic and size of this lotus).
inline bool ledger_valid(const process_ledger* l) noexcept {
  return l->magic == process_ledger::magic_v1 && l->size == sizeof(process_ledger);
}

/// Takes over a ledger inherited through fork: the parent's counts zeroed, the pid this
/// process's. Under the loader's lock (every runtime of the process agrees on it).
LOTUS_DETAIL_COLD inline process_ledger* adopt_ledger(process_ledger* l, std::int64_t me) noexcept {
  if (l->pid == me) return l;
  l->bytes.store(0, mo_relaxed);
  l->slots_used.store(0, mo_relaxed);
  for (ledger_slot& s : l->slots) {
    s.recorded.store(0, mo_relaxed);
    s.written.store(0, mo_relaxed);
    s.dropped.store(0, mo_relaxed);
    s.sanitized.store(0, mo_relaxed);
  }
  l->pid = me;
  return l;
}

/// The ledger of this process named in /proc/self/maps (its own, else one inherited through fork,
/// taken over), or nullptr. Parses the file in chunks on the stack (no allocation).
LOTUS_DETAIL_COLD inline process_ledger* find_ledger() noexcept {
  int fd = -1;
  do {
    fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return nullptr;
  static constexpr char suffix[] = "/memfd:lotus-ledger-v1 (deleted)";
  constexpr std::size_t suffix_len = sizeof suffix - 1;
  char buf[8192];
  std::size_t have = 0;
  process_ledger* found = nullptr;
  process_ledger* inherited = nullptr;
  const auto me = static_cast<std::int64_t>(::getpid());
  for (bool eof = false; found == nullptr && !(eof && have == 0);) {
    const char* nl = static_cast<const char*>(std::memchr(buf, '\n', have));
    // Read only when no whole line is left: a read of maps costs a walk of the mappings, and a
    // torch process has about 2,000 of them (a read per line was 2,000 reads, ~6 ms a start).
    if (nl == nullptr && !eof && have < sizeof buf) {
      const ssize_t n = ::read(fd, buf + have, sizeof buf - have);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        eof = true;
      } else {
        have += static_cast<std::size_t>(n);
      }
      continue;
    }
    const std::size_t len = nl != nullptr ? static_cast<std::size_t>(nl - buf) : have;
    // "start-end perms offset dev inode path": ours end in suffix and are rw-p.
    if (len > suffix_len && std::memcmp(buf + len - suffix_len, suffix, suffix_len) == 0) {
      std::uint64_t start = 0, end = 0;
      std::size_t i = 0;
      const auto hex = [&](std::uint64_t& v) {
        for (; i < len; ++i) {
          const char c = buf[i];
          const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
          if (d < 0) break;
          v = v * 16 + static_cast<std::uint64_t>(d);
        }
      };
      hex(start);
      if (i < len && buf[i] == '-') ++i;
      hex(end);
      const bool rw = i + 3 < len && buf[i + 1] == 'r' && buf[i + 2] == 'w';
      if (rw && end > start && end - start >= sizeof(process_ledger)) {
        auto* l = reinterpret_cast<process_ledger*>(static_cast<std::uintptr_t>(start));
        if (ledger_valid(l)) {
          if (l->pid == me) {
            found = l;
          } else if (inherited == nullptr) {
            inherited = l;
          }
        }
      }
    }
    // Drop the line (or a line longer than the buffer, which is no ledger's).
    const std::size_t used = nl != nullptr ? len + 1 : have;
    std::memmove(buf, buf + used, have - used);
    have -= used;
  }
  ::close(fd);
  if (found == nullptr && inherited != nullptr) found = adopt_ledger(inherited, me);
  return found;
}

/// A new ledger for this process, or nullptr (no memfd_create, no memory).
LOTUS_DETAIL_COLD inline process_ledger* make_ledger() noexcept {
  const int fd = ::memfd_create(ledger_name, MFD_CLOEXEC);
  if (fd < 0) return nullptr;
  void* p = MAP_FAILED;
  if (::ftruncate(fd, static_cast<off_t>(sizeof(process_ledger))) == 0) {
    p = ::mmap(nullptr, sizeof(process_ledger), PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  }
  ::close(fd);  // the mapping keeps the memory; no descriptor stays open
  if (p == MAP_FAILED) return nullptr;
  auto* l = static_cast<process_ledger*>(p);  // zero-filled: every counter starts at 0
  l->size = sizeof(process_ledger);
  l->pid = static_cast<std::int64_t>(::getpid());
  l->magic = process_ledger::magic_v1;
  return l;
}

LOTUS_DETAIL_COLD inline int ledger_rendezvous(dl_phdr_info*, std::size_t, void* out) noexcept {
  auto* l = static_cast<process_ledger**>(out);
  process_ledger* const last = g_ledger_joined;
  if (last != nullptr && ledger_valid(last)) {
    *l = adopt_ledger(last, static_cast<std::int64_t>(::getpid()));
  } else {
    *l = find_ledger();
    if (*l == nullptr) *l = make_ledger();
  }
  g_ledger_joined = *l;
  return 1;  // one call is enough: the loader's lock was what it needed
}

// fork() and the rendezvous: a child forked while another thread held the loader's lock in
// dl_iterate_phdr() inherits the lock held by a thread it does not have, and its own rendezvous
// would wait for it forever. The rendezvous is a section of g_ledger_gate (runtime/fork_gate.hpp),
// which the runtime's fork handlers close: fork() waits for a rendezvous in progress (at most
// 100 ms), and one starting waits for the fork (at most 1 s).
inline fork_gate g_ledger_gate;

/// This process's ledger, found or made under the loader's lock; nullptr when unavailable.
LOTUS_DETAIL_COLD inline process_ledger* process_ledger_of_this_process() noexcept {
  g_ledger_gate.enter(1000000000u);
  process_ledger* l = nullptr;
  ::dl_iterate_phdr(&ledger_rendezvous, &l);
  g_ledger_gate.leave();
  return l;
}

/// A runtime's place in the ledger: its slot (or none when the ledger is full or missing).
class ledger_entry {
 public:
  /// Joins this process's ledger (once per runtime and process; a forked child joins its own).
  /// Returns the byte counter every runtime of the process shares, or nullptr.
  LOTUS_DETAIL_COLD atom<std::uint64_t>* join() noexcept {
    const auto me = static_cast<std::int64_t>(::getpid());
    // joined_ too: after a fork another runtime may have taken the copy over already (its pid is
    // this process's), and this runtime's slot in it is the parent's.
    if (ledger_ != nullptr && joined_ == me && ledger_->pid == me) return &ledger_->bytes;
    ledger_ = process_ledger_of_this_process();
    slot_ = nullptr;
    joined_ = me;
    if (ledger_ == nullptr) return nullptr;
    const std::uint32_t i = ledger_->slots_used.fetch_add(1, mo_relaxed);
    if (i < ledger_slots) slot_ = &ledger_->slots[i];
    return &ledger_->bytes;
  }

  /// Publishes this runtime's counts and returns the process's: the sum over every runtime that
  /// has a slot (plus this one's when it has none).
  trace_stats process_totals(const trace_stats& own) noexcept {
    const auto me = static_cast<std::int64_t>(::getpid());
    if (ledger_ == nullptr || joined_ != me || ledger_->pid != me) return own;
    if (slot_ != nullptr) {
      slot_->recorded.store(own.recorded, mo_relaxed);
      slot_->written.store(own.written, mo_relaxed);
      slot_->dropped.store(own.dropped, mo_relaxed);
      slot_->sanitized.store(own.sanitized, mo_relaxed);
    }
    trace_stats sum = slot_ != nullptr ? trace_stats{} : own;
    std::uint32_t n = ledger_->slots_used.load(mo_relaxed);
    if (n > ledger_slots) n = ledger_slots;
    for (std::uint32_t i = 0; i < n; ++i) {
      const ledger_slot& s = ledger_->slots[i];
      sum.recorded += s.recorded.load(mo_relaxed);
      sum.written += s.written.load(mo_relaxed);
      sum.dropped += s.dropped.load(mo_relaxed);
      sum.sanitized += s.sanitized.load(mo_relaxed);
    }
    return sum;
  }

 private:
  process_ledger* ledger_ = nullptr;
  ledger_slot* slot_ = nullptr;
  std::int64_t joined_ = 0;  // the process that joined ledger_ (a forked child must join again)
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
