// lotus — the capture-request format, the trigger parser and the flight settings (internal)
// SPDX-License-Identifier: MIT
// What the flight recorder (flight.hpp) and lotus-tool capture share: a request line of the
// control file (FORMAT.md §8), its parser, the control file's names, ownership and append, and
// LOTUS_FLIGHT / LOTUS_TRIGGER's settings. Nothing of the recorder: lotus-tool includes this alone.
#pragma once

#include <dirent.h>      // opendir, readdir (this user's control files)
#include <errno.h>       // errno
#include <fcntl.h>       // open, O_*
#include <sys/random.h>  // getrandom (unpredictable names)
#include <sys/stat.h>    // fstat, lstat, mkdir
#include <time.h>        // gmtime_r, clock_gettime
#include <unistd.h>      // geteuid, getpid, read, write, close

#include <cstddef>      // size_t
#include <cstdint>      // uint64_t
#include <cstdio>       // snprintf
#include <cstring>      // memcpy, strlen
#include <string_view>  // string_view

#include "lotus/config.hpp"
#include "lotus/runtime/text.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// LOTUS_FLIGHT_BYTES when unset: the formatted records one process keeps in memory.
constexpr std::uint64_t flight_bytes_default = std::uint64_t{64} << 20;
/// The control files in the trace directory: one `capture` request per line (FORMAT.md §8),
/// per user, `.lotus-capture-<uid>`: a process obeys only the requests of its own user (its
/// effective uid), and a request of another user (root's `lotus-tool capture` included) goes to
/// that user's file, so it can never take this user's name. When another user took that name
/// anyway (planted in a shared directory), requests go to a private file of an unpredictable name,
/// `.lotus-capture-<uid>-<16 hex digits>` (created `O_EXCL`, mode 600), which the processes find
/// by listing the directory: no name fixed in advance can be taken from them.
constexpr const char flight_control_name[] = ".lotus-capture";
/// Control files of one user a process reads (the first name, older lotus's `_r1` ... `_r3`, the
/// private ones); a request goes to one of the first private ones whenever the first is taken.
constexpr unsigned flight_control_names = 8;
/// The control file is not appended to beyond this (a message asks to remove it).
constexpr std::uint64_t flight_control_max = std::uint64_t{1} << 20;

/// What flight mode does (settings from LOTUS_FLIGHT, LOTUS_FLIGHT_BYTES, LOTUS_TRIGGER).
/// `op:NAME>X` conditions one LOTUS_TRIGGER holds, and the longest NAME.
constexpr unsigned flight_max_named = 4;
constexpr std::size_t flight_max_op_name = 63;

struct flight_settings {
  std::uint64_t window_ns = 0;  // 0: flight mode off
  std::uint64_t max_bytes = flight_bytes_default;
  std::uint64_t wait_ns = 0;                              // wait>X; 0: none
  std::uint64_t share_permille = 0, share_window_ns = 0;  // waitshare>P%/W; 0: none
  std::uint64_t batch_ns = 0;                             // batch>X; 0: none
  std::uint64_t op_ns = 0;                                // op>X (any op); 0: none
  struct named_op {
    char name[flight_max_op_name + 1];  // the op's name as traced, without its S
    std::uint64_t ns;
  };
  named_op named[flight_max_named] = {};  // op:NAME>X
  unsigned named_count = 0;
  std::uint64_t margin_ns = 300000000;  // the tail: the window ends this long after a trigger

  /// The conditions of `o` (LOTUS_TRIGGER), the rest of these settings unchanged.
  LOTUS_DETAIL_COLD void take_triggers(const flight_settings& o) noexcept {
    wait_ns = o.wait_ns;
    share_permille = o.share_permille;
    share_window_ns = o.share_window_ns;
    batch_ns = o.batch_ns;
    op_ns = o.op_ns;
    named_count = o.named_count;
    for (unsigned i = 0; i < flight_max_named; ++i) named[i] = o.named[i];
  }

  /// The longest time a request may come after its anomaly began: an in-progress trigger's
  /// threshold, or 10 s for a request from outside (an alert through `lotus-tool serve`, whose
  /// trigger time is the stuck batch's start). Memory keeps that much more than the window (and
  /// a second for the writer's cycles), so a capture still holds the whole lead-up.
  std::uint64_t lookback_ns() const noexcept {
    std::uint64_t m = std::uint64_t{10} * 1000000000u;
    if (wait_ns > m) m = wait_ns;
    if (batch_ns > m) m = batch_ns;
    if (op_ns > m) m = op_ns;
    for (unsigned i = 0; i < named_count; ++i) m = named[i].ns > m ? named[i].ns : m;
    if (share_window_ns > m) m = share_window_ns;
    return m + 1000000000u;  // and a second for the writer's cycles
  }
};

/// The longest trigger duration (LOTUS_TRIGGER): a day, as LOTUS_FLIGHT's longest window.
constexpr std::uint64_t flight_max_duration_ns = std::uint64_t{86400} * 1000000000u;

/// A duration `<number><ns|us|ms|s|min>` at `s[i..]`; false when malformed or longer than
/// flight_max_duration_ns (never wrapped: 18446744074s is refused, not 290 ms).
LOTUS_DETAIL_COLD inline bool flight_parse_duration(std::string_view s, std::size_t& i,
                                                    std::uint64_t& out) noexcept {
  std::uint64_t v = 0;
  const std::size_t from = i;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    if (v > (std::uint64_t{1} << 40)) return false;
    v = v * 10 + static_cast<std::uint64_t>(s[i] - '0');
  }
  if (i == from) return false;
  static const struct {
    const char* unit;
    std::uint64_t ns;
  } units[] = {{"min", 60000000000ull},
               {"ms", 1000000ull},
               {"us", 1000ull},
               {"ns", 1ull},
               {"s", 1000000000ull}};
  for (const auto& u : units) {
    const std::size_t n = std::strlen(u.unit);
    if (s.substr(i, n) == u.unit) {
      i += n;
      if (v > flight_max_duration_ns / u.ns) return false;
      out = v * u.ns;
      return true;
    }
  }
  return false;
}

/// What LOTUS_TRIGGER takes, for the messages that refuse a value (runtime and Python).
constexpr const char flight_trigger_expected[] =
    "wait>DURATION, waitshare>P%/DURATION, batch>DURATION, op>DURATION and/or op:NAME>DURATION, "
    "comma-separated, DURATION such as 800ms or 10s, at most 1 day";

/// `c` may be part of an op name in `op:NAME>X`: what a traced name holds, but `>` and `,`.
constexpr bool flight_op_name_char(char c) noexcept {
  return static_cast<unsigned char>(c) > 0x20 && c != 0x7f && c != '>' && c != ',';
}

/// LOTUS_TRIGGER: `wait>DUR`, `waitshare>P%/DUR`, `batch>DUR`, `op>DUR` and `op:NAME>DUR`,
/// comma-separated (spaces allowed around them). False (and `out` unchanged) when any condition
/// is malformed.
LOTUS_DETAIL_COLD inline bool flight_parse_triggers(std::string_view s,
                                                    flight_settings& out) noexcept {
  flight_settings t = out;
  t.wait_ns = 0;
  t.share_permille = 0;
  t.share_window_ns = 0;
  t.batch_ns = 0;
  t.op_ns = 0;
  t.named_count = 0;
  std::size_t i = 0;
  auto skip_spaces = [&] {
    while (i < s.size() && s[i] == ' ') ++i;
  };
  skip_spaces();
  if (i == s.size()) {
    out = t;
    return true;
  }
  for (;;) {
    skip_spaces();
    if (s.substr(i, 10) == "waitshare>") {
      i += 10;
      std::uint64_t pct = 0;
      const std::size_t from = i;
      for (; i < s.size() && s[i] >= '0' && s[i] <= '9' && pct < 1000; ++i) {
        pct = pct * 10 + static_cast<std::uint64_t>(s[i] - '0');
      }
      if (i == from) return false;
      pct *= 10;
      if (i < s.size() && s[i] == '.') {
        ++i;
        if (i >= s.size() || s[i] < '0' || s[i] > '9') return false;
        pct += static_cast<std::uint64_t>(s[i++] - '0');
      }
      if (i + 1 >= s.size() || s[i] != '%' || s[i + 1] != '/') return false;
      i += 2;
      std::uint64_t w = 0;
      if (!flight_parse_duration(s, i, w) || w < 1000000 || pct == 0 || pct >= 1000) return false;
      t.share_permille = pct;
      t.share_window_ns = w;
    } else if (s.substr(i, 5) == "wait>") {
      i += 5;
      std::uint64_t w = 0;
      if (!flight_parse_duration(s, i, w) || w == 0) return false;
      t.wait_ns = w;
    } else if (s.substr(i, 6) == "batch>") {
      i += 6;
      std::uint64_t w = 0;
      if (!flight_parse_duration(s, i, w) || w == 0) return false;
      t.batch_ns = w;
    } else if (s.substr(i, 3) == "op>") {
      i += 3;
      std::uint64_t w = 0;
      if (!flight_parse_duration(s, i, w) || w == 0) return false;
      t.op_ns = w;
    } else if (s.substr(i, 3) == "op:") {
      i += 3;
      const std::size_t from = i;
      while (i < s.size() && flight_op_name_char(s[i])) ++i;
      const std::size_t n = i - from;
      if (n == 0 || n > flight_max_op_name || t.named_count == flight_max_named) return false;
      if (i >= s.size() || s[i] != '>') return false;
      ++i;
      std::uint64_t w = 0;
      if (!flight_parse_duration(s, i, w) || w == 0) return false;
      flight_settings::named_op& o = t.named[t.named_count++];
      std::memcpy(o.name, s.data() + from, n);
      o.name[n] = '\0';
      o.ns = w;
    } else {
      return false;
    }
    skip_spaces();
    if (i == s.size()) break;
    if (s[i] != ',') return false;
    ++i;
  }
  out = t;
  return true;
}

/// One capture request: a line of the control file,
///   capture <id> <trigger_ns> <end_ns> <pid> <reason>
/// `id` names the capture directory (`capture-<id>`); every process writes the window
/// [end - LOTUS_FLIGHT, end] of its records there once its clock passed `end`; `pid` 0: every
/// process, else that process and its children (DataLoader workers).
struct flight_request {
  char id[64] = {};
  std::uint64_t trigger_ns = 0, end_ns = 0, pid = 0;
  char reason[192] = {};
};

/// `c` may be part of a capture id.
constexpr bool flight_id_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

/// 64 bits another user cannot predict (getrandom; /dev/urandom; at worst the clock and pid).
LOTUS_DETAIL_COLD inline std::uint64_t flight_random64() noexcept {
  std::uint64_t v = 0;
  if (::getrandom(&v, sizeof v, GRND_NONBLOCK) == static_cast<ssize_t>(sizeof v)) return v;
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0) {
    const ssize_t n = ::read(fd, &v, sizeof v);
    ::close(fd);
    if (n == static_cast<ssize_t>(sizeof v)) return v;
  }
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  v = static_cast<std::uint64_t>(ts.tv_nsec) ^ (static_cast<std::uint64_t>(ts.tv_sec) << 30) ^
      (static_cast<std::uint64_t>(::getpid()) << 44) ^ reinterpret_cast<std::uintptr_t>(&v);
  v ^= v >> 33;  // splitmix64's finalizer
  v *= 0xff51afd7ed558ccdull;
  v ^= v >> 33;
  return v;
}

/// A fresh id: `<UTC YYYYmmddTHHMMSS>Z-<pid>-<seq>-<16 hex digits>`. The random part makes the
/// capture directory's name unpredictable: another user cannot create it first.
LOTUS_DETAIL_COLD inline void flight_make_id(char (&id)[64], std::uint64_t when_ns,
                                             std::uint64_t pid, std::uint64_t seq) noexcept {
  const time_t secs = static_cast<time_t>(when_ns / 1000000000u);
  struct tm tm {};
  if (::gmtime_r(&secs, &tm) == nullptr) tm = {};
  std::snprintf(id, sizeof id, "%04d%02d%02dT%02d%02d%02dZ-%llu-%llu-%016llx", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<unsigned long long>(pid), static_cast<unsigned long long>(seq),
                static_cast<unsigned long long>(flight_random64()));
}

/// Copies `reason` into `r.reason`: control bytes become '_', cut to fit.
LOTUS_DETAIL_COLD inline void flight_set_reason(flight_request& r,
                                                std::string_view reason) noexcept {
  std::size_t n = 0;
  for (const char c : reason) {
    if (n + 1 >= sizeof r.reason) break;
    const auto u = static_cast<unsigned char>(c);
    r.reason[n++] = u < 0x20 || u == 0x7f ? '_' : c;
  }
  r.reason[n] = '\0';
}

/// The request as its control-file line (with the newline); its length, 0 when it does not fit.
LOTUS_DETAIL_COLD inline std::size_t flight_request_line(const flight_request& r, char* out,
                                                         std::size_t size) noexcept {
  const int n = std::snprintf(
      out, size, "capture %s %llu %llu %llu %s\n", r.id,
      static_cast<unsigned long long>(r.trigger_ns), static_cast<unsigned long long>(r.end_ns),
      static_cast<unsigned long long>(r.pid), r.reason[0] != '\0' ? r.reason : "-");
  return n > 0 && static_cast<std::size_t>(n) < size ? static_cast<std::size_t>(n) : 0;
}

/// Parses one control-file line (without its newline); false when it is not a valid request.
LOTUS_DETAIL_COLD inline bool flight_parse_request(std::string_view line,
                                                   flight_request& r) noexcept {
  if (line.substr(0, 8) != "capture ") return false;
  std::size_t i = 8, n = 0;
  for (; i < line.size() && line[i] != ' '; ++i) {
    if (!flight_id_char(line[i]) || n + 1 >= sizeof r.id) return false;
    r.id[n++] = line[i];
  }
  r.id[n] = '\0';
  if (n == 0 || r.id[0] == '.') return false;
  std::uint64_t* nums[] = {&r.trigger_ns, &r.end_ns, &r.pid};
  for (std::uint64_t* v : nums) {
    if (i >= line.size() || line[i] != ' ') return false;
    ++i;
    const std::size_t from = i;
    *v = 0;
    for (; i < line.size() && line[i] >= '0' && line[i] <= '9'; ++i) {
      if (*v > (std::uint64_t{1} << 62) / 10) return false;
      *v = *v * 10 + static_cast<std::uint64_t>(line[i] - '0');
    }
    if (i == from) return false;
  }
  if (i >= line.size() || line[i] != ' ') return false;
  flight_set_reason(r, line.substr(i + 1));
  return true;
}

/// The `k`th fixed control file name of user `uid` in `dir` (`.lotus-capture-<uid>`; k > 0:
/// `..._r<k>`, older lotus's second names, still read).
LOTUS_DETAIL_COLD inline text flight_control_path(const char* dir, std::uint64_t uid,
                                                  unsigned k) noexcept {
  text path;
  path.add(dir).add('/').add(flight_control_name).add('-').add(uid);
  if (k != 0) path.add("_r").add(std::uint64_t{k});
  return path;
}

/// A control file lotus reads or appends to: a regular file of this user with one link.
LOTUS_DETAIL_COLD inline bool flight_control_owned(const struct stat& st) noexcept {
  return S_ISREG(st.st_mode) && st.st_uid == ::geteuid() && st.st_nlink == 1;
}

/// A control file name (without its directory) of user `uid`: `.lotus-capture-<uid>`,
/// `..._r<1-3>` (older lotus) or `...-<16 hex digits>` (private).
LOTUS_DETAIL_COLD inline bool flight_control_name_of(const char* name, std::uint64_t uid) noexcept {
  text first;
  first.add(flight_control_name).add('-').add(uid);
  const std::size_t n = first.size();
  if (std::strncmp(name, first.c_str(), n) != 0) return false;
  const char* rest = name + n;
  if (rest[0] == '\0') return true;
  if (rest[0] == '_' && rest[1] == 'r' && rest[2] >= '1' && rest[2] <= '3' && rest[3] == '\0') {
    return true;
  }
  if (rest[0] != '-' || std::strlen(rest + 1) != 16) return false;
  for (const char* p = rest + 1; *p != '\0'; ++p) {
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return false;
  }
  return true;
}

/// One control file name (without its directory).
struct flight_control_file {
  char name[64];
};

/// Lists this user's control files in `dir`, its own regular files with one link only (lstat),
/// the first name first; at most `max`. `first_taken`: the first name exists and is not one.
LOTUS_DETAIL_COLD inline unsigned flight_control_list(const char* dir, std::uint64_t uid,
                                                      flight_control_file* out, unsigned max,
                                                      bool* first_taken) noexcept {
  *first_taken = false;
  unsigned n = 0;
  const text first = flight_control_path(dir, uid, 0);
  struct stat st {};
  if (!first.overflow && ::lstat(first.c_str(), &st) == 0) {
    if (flight_control_owned(st) && n < max) {
      std::snprintf(out[n++].name, sizeof out->name, "%s-%llu", flight_control_name,
                    static_cast<unsigned long long>(uid));
    } else if (!flight_control_owned(st)) {
      *first_taken = true;
    }
  }
  DIR* d = ::opendir(dir);
  if (d == nullptr) return n;
  while (const dirent* e = ::readdir(d)) {
    if (n == max) break;
    if (!flight_control_name_of(e->d_name, uid)) continue;
    text path;
    path.add(dir).add('/').add(e->d_name);
    if (path.overflow || path.size() == first.size()) continue;  // the first name: listed above
    // A name that does not fit is skipped, not cut: the cut name would be another file's.
    const std::size_t len = std::strlen(e->d_name);
    if (len >= sizeof out->name) continue;
    if (::lstat(path.c_str(), &st) != 0 || !flight_control_owned(st)) continue;
    std::memcpy(out[n++].name, e->d_name, len + 1);
  }
  ::closedir(d);
  return n;
}

/// Creates `<dir>/capture-<id>` (best effort) as the request is made, before its line is
/// readable: a directory of the job's user before anyone else knows its name.
LOTUS_DETAIL_COLD inline void flight_claim_capture_dir(const char* dir, const char* id) noexcept {
  text path;
  path.add(dir).add("/capture-").add(id);
  if (!path.overflow) ::mkdir(path.c_str(), 0777);
}

/// Names per capture directory: `capture-<id>`, `capture-<id>_r1` ... `_r7` (the same for every
/// process of the job, so they all write into one), then one of an unpredictable name.
constexpr unsigned flight_capture_dir_names = 8;

/// The directory of capture `id` in `dir` this process writes its part into: `capture-<id>`
/// created if missing, unless that name is not a directory of this user (taken by another user,
/// a symlink, a file): then the next name, `capture-<id>_r<k>`, and when all are taken
/// `capture-<id>_<16 hex digits>`; never no directory, unless the directory itself fails
/// (false, `err` set: no space, no permission).
LOTUS_DETAIL_COLD inline bool flight_capture_dir(const char* dir, const char* id, text& out,
                                                 int* err) noexcept {
  *err = 0;
  for (unsigned k = 0; k <= flight_capture_dir_names; ++k) {
    out.clear();
    out.add(dir).add("/capture-").add(id);
    if (k == flight_capture_dir_names) {
      char hex[24];
      std::snprintf(hex, sizeof hex, "_%016llx",
                    static_cast<unsigned long long>(flight_random64()));
      out.add(hex);
    } else if (k != 0) {
      out.add("_r").add(std::uint64_t{k});
    }
    if (out.overflow) {
      *err = ENAMETOOLONG;
      return false;
    }
    if (::mkdir(out.c_str(), 0777) != 0 && errno != EEXIST) {
      *err = errno;
      return false;
    }
    struct stat st {};
    if (::lstat(out.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid()) {
      return true;
    }
  }
  *err = EEXIST;
  return false;
}

/// Appends `r` to this user's control file in `dir` with one write(2) (O_APPEND: lines of
/// concurrent writers never interleave), after creating its capture directory
/// (flight_claim_capture_dir). The first name is created if missing (mode 600); an existing file
/// must be a regular file of this user with one link, never a symlink, FIFO or device, and
/// smaller than flight_control_max. When the first name is taken by anything else, the request
/// goes to one of this user's private control files (created with an unpredictable name if there
/// is none). On failure: false, `why` says why.
LOTUS_DETAIL_COLD inline bool flight_append_request(const char* dir, const flight_request& r,
                                                    const char** why, int* err) noexcept {
  char line[320];
  const std::size_t n = flight_request_line(r, line, sizeof line);
  *err = 0;
  const auto uid = static_cast<std::uint64_t>(::geteuid());
  const text first = flight_control_path(dir, uid, 0);
  if (first.overflow || n == 0) {
    *why = "the path or the request is too long";
    return false;
  }
  flight_claim_capture_dir(dir, r.id);
  // The first name, then this user's private files, then a new private file (a few tries: a
  // name that exists already is another one).
  flight_control_file mine[flight_control_names];
  unsigned listed = 0;
  bool listed_done = false;
  for (unsigned k = 0; k < 1 + flight_control_names + 4; ++k) {
    text path;
    int flags = O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
    if (k == 0) {
      path = first;
      flags |= O_CREAT;
    } else {
      if (!listed_done) {
        bool taken = false;
        listed = flight_control_list(dir, uid, mine, flight_control_names, &taken);
        listed_done = true;
      }
      if (k - 1 < listed) {
        path.add(dir).add('/').add(mine[k - 1].name);
        if (path.size() == first.size()) continue;  // the first name: tried
      } else if (k - 1 >= flight_control_names) {
        char name[64];
        std::snprintf(name, sizeof name, "%s-%llu-%016llx", flight_control_name,
                      static_cast<unsigned long long>(uid),
                      static_cast<unsigned long long>(flight_random64()));
        path.add(dir).add('/').add(name);
        flags |= O_CREAT | O_EXCL;
      } else {
        continue;
      }
    }
    if (path.overflow) {
      *why = "the path or the request is too long";
      return false;
    }
    int fd = -1;
    do {
      fd = ::open(path.c_str(), flags, 0600);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
      // A symlink (ELOOP), a FIFO (ENXIO), another user's file (EACCES), a taken private name
      // (EEXIST): the next. Any other error (no such directory...) is the directory's: said.
      const int e = errno;
      if (e == ELOOP || e == ENXIO || e == EACCES || e == EISDIR || e == EPERM || e == EEXIST ||
          e == ENOENT) {
        if (e == ENOENT && k == 0) {
          *err = e;
          *why = "cannot open the control file";
          return false;
        }
        *err = e;  // said if no name is left
        *why = "cannot open the control file, nor a private one";
        continue;
      }
      *err = e;
      *why = "cannot open the control file";
      return false;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !flight_control_owned(st)) {
      ::close(fd);
      *err = 0;
      *why =
          "every control file name of this user is taken by a file that is not its own regular "
          "file with one link";
      continue;
    }
    if (static_cast<std::uint64_t>(st.st_size) >= flight_control_max) {
      ::close(fd);
      *why = "the control file is over 1 MiB (remove it)";
      return false;
    }
    ssize_t w = -1;
    do {
      w = ::write(fd, line, n);
    } while (w < 0 && errno == EINTR);
    if (w < 0) *err = errno;
    ::close(fd);
    if (w != static_cast<ssize_t>(n)) {
      *why = "cannot write the control file";
      return false;
    }
    return true;
  }
  return false;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
