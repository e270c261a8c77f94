// lotus — lotus-tool live: the `serve` HTTP endpoint (/metrics, the capture webhook)
// SPDX-License-Identifier: MIT
#include "live/serve.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "live/live.hpp"
#include "live/loop.hpp"
#include "util/diag.hpp"
#include "util/error.hpp"
#include "util/output.hpp"

namespace lotus_tool {

namespace {

// ---- HTTP ---------------------------------------------------------------------------------------

constexpr std::size_t k_max_request = 8192;

struct connection {
  int fd = -1;
  bool rejected = false;  // beyond --max-connections: answered 503 at once, then drained
  std::string in, out;
  std::size_t sent = 0, drained = 0;
  std::uint64_t deadline_ns = 0;
  bool responding = false;
  bool draining = false;       // reply sent, write side shut: reading what the client still sends
  std::size_t header_end = 0;  // past the header's empty line, once it arrived (else 0)
  std::size_t body_len = 0;    // the body awaited (its Content-Length, bounded)
};

/// Connections beyond --max-connections get their 503 at once, without waiting for their
/// request, and are then drained for at most this long (closing on unread bytes would reset the
/// connection before the client reads its answer).
constexpr std::uint64_t k_reject_linger_ns = 2000000000u;

/// How many rejected connections may linger at once: what the descriptor limit leaves after the
/// served ones. Beyond, `serve` stops accepting for a moment: new clients wait in the listen
/// queue (they are answered once a lingering one is closed), never reset.
std::size_t reject_slots(std::size_t serving_max) {
  rlimit rl{};
  std::size_t fds = 1024;
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    fds = static_cast<std::size_t>(rl.rlim_cur);
  }
  const std::size_t reserve = serving_max + 32;  // the served ones, the listener, live files
  return std::max<std::size_t>(16, std::min<std::size_t>(4096, fds > reserve ? fds - reserve : 0));
}
std::string response(int status, const char* reason, const std::string& type,
                     const std::string& body, bool head_only, const char* allow = "GET, HEAD") {
  std::string r = "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\n";
  r += "Content-Type: " + type + "\r\n";
  r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  r += "Cache-Control: no-store\r\nConnection: close\r\n";
  if (status == 405) r += std::string("Allow: ") + allow + "\r\n";
  if (status == 401) r += "WWW-Authenticate: Bearer realm=\"lotus-tool serve\"\r\n";
  r += "\r\n";
  if (!head_only) r += body;
  return r;
}

std::string error_response(int status, const char* reason, const std::string& why = {},
                           const char* allow = "GET, HEAD") {
  return response(status, reason, "text/plain; charset=utf-8",
                  std::string(reason) + (why.empty() ? "" : ": " + why) + "\n", false, allow);
}

/// The webhook's bound on a notification's body (Alertmanager's are a few KiB).
constexpr std::size_t k_max_body = 65536;

/// What serve answers with: the directory, the figures' memory, the webhook's token.
struct serve_state {
  std::string dir;
  live_memory memory;
  std::uint64_t stall_floor_ns = k_stall_floor_ns;
  std::string token;  // empty: no webhook
  std::uint64_t last_capture_ns = 0;
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

std::string trim(std::string s) {
  const char* ws = " \t\r\n";
  const std::size_t a = s.find_first_not_of(ws);
  if (a == std::string::npos) return {};
  return s.substr(a, s.find_last_not_of(ws) - a + 1);
}

/// Equal without an early exit (the token's bytes are not timed one by one).
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return diff == 0;
}

/// A request's line and the header fields serve looks at.
struct request_head {
  std::string method, target, version;
  bool bad = false;
  std::string authorization;
  bool has_length = false, bad_length = false, chunked = false;
  std::size_t length = 0;
};

request_head parse_head(const std::string& req) {
  request_head h;
  std::size_t eol = req.find("\r\n");
  const std::string line = req.substr(0, eol);
  const std::size_t sp1 = line.find(' ');
  const std::size_t sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos ||
      line.find(' ', sp2 + 1) != std::string::npos) {
    h.bad = true;
    return h;
  }
  h.method = line.substr(0, sp1);
  h.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  h.version = line.substr(sp2 + 1);
  if (h.version != "HTTP/1.1" && h.version != "HTTP/1.0") h.bad = true;
  const std::size_t q = h.target.find('?');
  if (q != std::string::npos) h.target.resize(q);
  while (eol != std::string::npos && eol + 2 < req.size()) {
    const std::size_t from = eol + 2;
    eol = req.find("\r\n", from);
    const std::string field = req.substr(from, eol == std::string::npos ? eol : eol - from);
    const std::size_t colon = field.find(':');
    if (colon == std::string::npos) continue;
    const std::string name = lower(field.substr(0, colon));
    const std::string value = trim(field.substr(colon + 1));
    if (name == "authorization") {
      h.authorization = value;
    } else if (name == "transfer-encoding") {
      h.chunked = true;  // any: only Content-Length bodies are read
    } else if (name == "content-length") {
      std::size_t n = 0;
      const bool digits = !value.empty() && value.size() <= 12 &&
                          value.find_first_not_of("0123456789") == std::string::npos;
      if (digits) n = static_cast<std::size_t>(std::stoull(value));
      if (!digits || (h.has_length && n != h.length)) h.bad_length = true;
      h.has_length = true;
      h.length = n;
    }
  }
  return h;
}

/// The reply to a request whose header is complete in `req` (through its last CRLF), or empty
/// when its body must be read first (`need_body` set): then called again with `body`.
std::string answer(const std::string& req, const std::string* body, serve_state& st,
                   std::size_t& need_body) {
  need_body = 0;
  const request_head h = parse_head(req);
  if (h.bad) return error_response(400, "Bad Request");
  const std::string& target = h.target;
  if (target == "/capture" && st.token.empty()) {
    return error_response(404, "Not Found",
                          "no webhook: serve was started without --capture-webhook");
  }
  if (target == "/capture") {
    if (h.method != "POST") {
      return error_response(405, "Method Not Allowed", "the webhook takes POST", "POST");
    }
    const std::string auth = h.authorization;
    if (auth.size() < 7 || lower(auth.substr(0, 7)) != "bearer " ||
        !same_secret(trim(auth.substr(7)), st.token)) {
      return error_response(401, "Unauthorized",
                            "send the token of --capture-webhook as 'Authorization: Bearer TOKEN'");
    }
    if (h.chunked) {
      return error_response(400, "Bad Request", "send the body with a Content-Length, not chunked");
    }
    if (!h.has_length) return error_response(411, "Length Required");
    if (h.bad_length) return error_response(400, "Bad Request", "bad Content-Length");
    if (h.length > k_max_body) {
      return error_response(413, "Payload Too Large",
                            "a notification is at most " + std::to_string(k_max_body) + " bytes");
    }
    if (body == nullptr && h.length > 0) {
      need_body = h.length;
      return {};
    }
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    const std::uint64_t now = static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u +
                              static_cast<std::uint64_t>(ts.tv_nsec);
    // The live figures now: when the anomaly the alert names began.
    std::vector<std::string> warnings;
    std::vector<live_process> procs;
    try {
      procs = st.memory.read(st.dir, warnings);
    } catch (const tool_error&) {
      // DIR not listable: the request says "now".
    }
    const webhook_result r = capture_on_alert(st.dir, body == nullptr ? std::string() : *body,
                                              st.last_capture_ns, now, procs);
    const char* reason = r.status == 200   ? "OK"
                         : r.status == 400 ? "Bad Request"
                                           : "Internal Server Error";
    return response(r.status, reason, "text/plain; charset=utf-8", r.body + "\n", false);
  }
  if (h.method != "GET" && h.method != "HEAD") return error_response(405, "Method Not Allowed");
  const bool head = h.method == "HEAD";
  if (target == "/metrics") {
    std::vector<std::string> warnings;
    std::vector<live_process> procs;
    struct stat sb {};
    if (::stat(st.dir.c_str(), &sb) != 0 && errno == ENOENT) {
      // Not there yet (serve started before the job): no series until it appears.
    } else {
      try {
        procs = st.memory.read(st.dir, warnings);
      } catch (const tool_error&) {
        return error_response(503, "Service Unavailable");
      }
    }
    return response(200, "OK", "text/plain; version=0.0.4; charset=utf-8",
                    render_metrics(procs, st.stall_floor_ns), head);
  }
  if (target == "/") {
    return response(200, "OK", "text/plain; charset=utf-8",
                    "lotus-tool serve: Prometheus metrics of the lotus trace in this directory at "
                    "/metrics\n",
                    head);
  }
  return error_response(404, "Not Found");
}

int listen_on(const std::string& spec) {
  std::string host, port;
  if (!spec.empty() && spec[0] == '[') {  // [v6]:port
    const std::size_t close = spec.find(']');
    if (close == std::string::npos || close + 1 >= spec.size() || spec[close + 1] != ':') {
      throw tool_error(
          exit_usage, "--listen: expected HOST:PORT or [IPV6]:PORT, got '" + printable(spec) + "'");
    }
    host = spec.substr(1, close - 1);
    port = spec.substr(close + 2);
  } else {
    const std::size_t colon = spec.rfind(':');
    if (colon == std::string::npos || spec.find(':') != colon) {
      throw tool_error(
          exit_usage, "--listen: expected HOST:PORT or [IPV6]:PORT, got '" + printable(spec) + "'");
    }
    host = spec.substr(0, colon);
    port = spec.substr(colon + 1);
    if (host.empty()) {
      throw tool_error(
          exit_usage,
          "--listen '" + printable(spec) +
              "' names no host, which would listen on every interface: give "
              "0.0.0.0:PORT (or [::]:PORT) for that, 127.0.0.1:PORT for this host only");
    }
  }
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos || std::stoul(port) > 65535) {
    throw tool_error(exit_usage, "--listen: bad port '" + printable(port) + "' (0..65535)");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) {
    throw tool_error(exit_usage,
                     "--listen: cannot resolve '" + printable(host) + "': " + gai_strerror(rc));
  }
  std::string why = "no address";
  int fd = -1;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) break;
    why = std::strerror(errno);
    ::close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0) throw tool_error(exit_io, "cannot listen on " + printable(spec) + ": " + why);
  return fd;
}

/// True when the socket listens on every interface (0.0.0.0 or ::).
bool bound_to_any(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return false;
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    return IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr);
  }
  return reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr.s_addr == htonl(INADDR_ANY);
}

std::string bound_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  char host[INET6_ADDRSTRLEN] = {};
  unsigned port = 0;
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    port = ntohs(a->sin6_port);
    return "[" + std::string(host) + "]:" + std::to_string(port);
  }
  const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
  inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
  port = ntohs(a->sin_port);
  return std::string(host) + ":" + std::to_string(port);
}

/// True when the socket listens on a loopback address only (127.0.0.0/8, ::1).
bool bound_to_loopback(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return false;
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    return IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
  }
  return (ntohl(reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr.s_addr) >> 24) == 127;
}

/// The webhook's token: the file's content, trimmed; 16 to 1024 printable ASCII bytes. The file
/// is opened without blocking and without following a symlink, and must be a regular file (a FIFO
/// would hang serve before it listens; a directory or a device is no token). It is refused when
/// group or others may write it or a user other than this one (or root) owns it: whoever can
/// change the token can ask for captures. Readable by group or others: one warning.
std::string read_token(const std::string& path) {
  const std::string what = "--capture-webhook: '" + printable(path) + "'";
  int fd = -1;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    if (errno == ELOOP) {
      throw tool_error(exit_usage, what +
                                       " is a symbolic link: pass the file it points to "
                                       "(e.g. \"$(realpath TOKEN_FILE)\")");
    }
    throw tool_error(exit_usage, what + ": cannot read: " + std::strerror(errno));
  }
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } close_fd{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    throw tool_error(exit_usage, what + ": cannot read: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    const char* kind = S_ISFIFO(st.st_mode)                         ? "a FIFO"
                       : S_ISDIR(st.st_mode)                        ? "a directory"
                       : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                       : S_ISSOCK(st.st_mode)                       ? "a socket"
                                                                    : "not a regular file";
    throw tool_error(exit_usage, what + " is " + kind +
                                     ": the token must be in a regular file (e.g. openssl rand "
                                     "-hex 32 > TOKEN_FILE; chmod 600 TOKEN_FILE)");
  }
  if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    throw tool_error(exit_usage, what + " is owned by another user (uid " +
                                     std::to_string(st.st_uid) +
                                     "), who could change the token: use a file of this user "
                                     "(or root), mode 600");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    throw tool_error(exit_usage, what +
                                     " is writable by group or others, who could change the "
                                     "token: chmod 600 it");
  }
  if ((st.st_mode & (S_IRGRP | S_IROTH)) != 0) {
    warning(what +
                " is readable by group or others: whoever reads the token can ask for "
                "captures (chmod 600 it, or 640 with Alertmanager's group)",
            "lotus-tool serve");
  }
  std::string text(4097, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, &text[got], text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw tool_error(exit_usage, what + ": cannot read: " + std::strerror(errno));
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  text.resize(got);
  text = trim(text);
  bool ok = text.size() >= 16 && text.size() <= 1024;
  for (const char c : text) ok = ok && c > 0x20 && c < 0x7f;
  if (!ok) {
    throw tool_error(exit_usage, "--capture-webhook: '" + printable(path) +
                                     "' must hold one token of 16 to 1024 printable ASCII "
                                     "characters without spaces (e.g. openssl rand -hex 32)");
  }
  return text;
}

}  // namespace

// ---- serve
// ----------------------------------------------------------------------------------------

void run_serve(const serve_args& a) {
  if (a.max_connections < 1 || a.max_connections > 4096) {
    throw tool_error(exit_usage, "--max-connections must be between 1 and 4096");
  }
  if (!(a.timeout_s >= 0.1 && a.timeout_s <= 3600)) {
    throw tool_error(exit_usage, "--timeout must be between 0.1 and 3600 seconds");
  }
  check_stall_after(a.stall_after_s);
  wait_note(a.dir, "lotus-tool serve");
  std::string token;
  if (!a.capture_webhook_token_file.empty()) token = read_token(a.capture_webhook_token_file);
  const int lfd = listen_on(a.listen);
  catch_stop_signals();
  if (!token.empty() && !bound_to_loopback(lfd) && !a.capture_webhook_remote) {
    ::close(lfd);
    throw tool_error(exit_usage,
                     "--capture-webhook on " + printable(a.listen) +
                         ", not a loopback address: any host that can reach this one could ask "
                         "for captures with the token; add --capture-webhook-remote to allow it "
                         "(or run Alertmanager on this host with --listen 127.0.0.1:PORT)");
  }
  if (bound_to_any(lfd)) {
    warning("listening on every interface (" + bound_address(lfd) +
                "): any host that can reach this one reads the job's figures (op names, host "
                "names, pids); --listen 127.0.0.1:PORT keeps them on this host",
            "lotus-tool serve");
  }
  std::printf("lotus-tool serve: listening on http://%s/metrics\n", bound_address(lfd).c_str());
  if (!token.empty()) {
    std::printf("lotus-tool serve: Alertmanager webhook at http://%s/capture\n",
                bound_address(lfd).c_str());
  }
  std::fflush(stdout);
  const auto timeout_ns = static_cast<std::uint64_t>(a.timeout_s * 1e9);
  serve_state state;
  state.dir = a.dir;
  state.stall_floor_ns = static_cast<std::uint64_t>(a.stall_after_s * 1e9);
  state.token = token;
  std::vector<connection> conns;
  const std::size_t reject_max = reject_slots(a.max_connections);
  while (!stop_requested()) {
    std::size_t serving = 0;
    for (const connection& c : conns) serving += c.rejected || c.draining ? 0 : 1;
    const bool room = serving < a.max_connections || conns.size() - serving < reject_max;
    std::vector<pollfd> fds;
    fds.push_back({lfd, static_cast<short>(room ? POLLIN : 0), 0});
    for (const connection& c : conns) {
      fds.push_back({c.fd, static_cast<short>(c.responding && !c.draining ? POLLOUT : POLLIN), 0});
    }
    const int n = ::poll(fds.data(), fds.size(), 200);
    if (n < 0 && errno != EINTR)
      throw tool_error(exit_io, std::string("poll: ") + std::strerror(errno));
    const std::uint64_t now = now_ns(CLOCK_MONOTONIC);
    if (n > 0 && (fds[0].revents & POLLIN) != 0) {
      for (int k = 0; k < 64; ++k) {  // a few per turn: the others' turns come soon
        const bool serve_it = serving < a.max_connections;
        if (!serve_it && conns.size() - serving >= reject_max) break;  // left in the queue
        const int cfd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (cfd < 0) break;
        connection c;
        c.fd = cfd;
        if (serve_it) {
          c.deadline_ns = now + timeout_ns;
          ++serving;
        } else {
          c.rejected = true;
          c.out = error_response(503, "Service Unavailable");
          c.responding = true;
          c.deadline_ns = now + std::min(timeout_ns, k_reject_linger_ns);
        }
        conns.push_back(std::move(c));
      }
    }
    for (std::size_t i = 0; i < conns.size(); ++i) {
      connection& c = conns[i];
      const short rev = i + 1 < fds.size() && fds[i + 1].fd == c.fd ? fds[i + 1].revents : 0;
      bool done = false;
      if (c.draining && (rev & (POLLIN | POLLHUP | POLLERR)) != 0) {
        char buf[4096];
        const ssize_t r = ::recv(c.fd, buf, sizeof buf, 0);
        if (r > 0) c.drained += static_cast<std::size_t>(r);
        if ((r <= 0 && !(r < 0 && (errno == EAGAIN || errno == EINTR))) || c.drained > (1u << 16)) {
          done = true;
        }
      } else if (!c.responding && (rev & (POLLIN | POLLHUP | POLLERR)) != 0) {
        char buf[4096];
        const ssize_t r = ::recv(c.fd, buf, sizeof buf, 0);
        if (r <= 0 && !(r < 0 && (errno == EAGAIN || errno == EINTR))) {
          done = true;
        } else if (r > 0) {
          c.in.append(buf, static_cast<std::size_t>(r));
          if (c.header_end == 0) {
            const std::size_t end = c.in.find("\r\n\r\n");
            if (end != std::string::npos && end + 4 <= k_max_request) {
              c.header_end = end + 4;
              c.out = answer(c.in.substr(0, end + 2), nullptr, state, c.body_len);
              c.responding = !c.out.empty();
            } else if (end != std::string::npos || c.in.size() > k_max_request) {
              c.out = error_response(431, "Request Header Fields Too Large");
              c.responding = true;
            }
          }
          // A body (bounded by answer(): at most k_max_body), once all of it arrived.
          if (!c.responding && c.header_end != 0 && c.in.size() >= c.header_end + c.body_len) {
            const std::string body = c.in.substr(c.header_end, c.body_len);
            std::size_t again = 0;
            c.out = answer(c.in.substr(0, c.header_end - 2), &body, state, again);
            c.responding = true;
          }
        }
      } else if (c.responding && (rev & (POLLOUT | POLLHUP | POLLERR)) != 0) {
        const ssize_t w = ::send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
        if (w > 0) {
          c.sent += static_cast<std::size_t>(w);
          if (c.sent == c.out.size()) {  // lingering close: what the client still sends is read
            ::shutdown(c.fd, SHUT_WR);
            c.draining = true;
            c.deadline_ns = std::min(c.deadline_ns, now + 2000000000u);
          }
        } else if (!(w < 0 && (errno == EAGAIN || errno == EINTR))) {
          done = true;
        }
      }
      if (!done && now > c.deadline_ns) {  // a slow or idle client: 408 if nothing was sent
        if (!c.responding && !c.draining) {
          const std::string r = error_response(408, "Request Timeout");
          const ssize_t w = ::send(c.fd, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
          static_cast<void>(w);
        }
        done = true;
      }
      if (done) {
        ::shutdown(c.fd, SHUT_RDWR);
        ::close(c.fd);
        c.fd = -1;
      }
    }
    std::vector<connection> keep;
    for (connection& c : conns) {
      if (c.fd >= 0) keep.push_back(std::move(c));
    }
    conns.swap(keep);
  }
  for (connection& c : conns) ::close(c.fd);
  ::close(lfd);
}

}  // namespace lotus_tool
