// lotus — lotus-tool live: `top` frames and the `serve` HTTP endpoint
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
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "live/live.hpp"
#include "util/diag.hpp"
#include "util/error.hpp"
#include "util/output.hpp"

namespace lotus_tool {

namespace {

std::atomic<bool> g_stop{false};

void on_stop_signal(int) { g_stop.store(true); }

void catch_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

std::uint64_t now_ns(clockid_t c) {
  timespec ts{};
  clock_gettime(c, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

void sleep_ns(std::uint64_t ns) {
  // In slices, so that a signal ends the wait soon.
  const std::uint64_t end = now_ns(CLOCK_MONOTONIC) + ns;
  while (!g_stop.load() && now_ns(CLOCK_MONOTONIC) < end) {
    const timespec ts{0, 50000000};
    nanosleep(&ts, nullptr);
  }
}

// ---- HTTP ---------------------------------------------------------------------------------------

constexpr std::size_t k_max_request = 8192;

struct connection {
  int fd = -1;
  bool rejected = false;  // beyond --max-connections: answered 503 at once, then drained
  std::string in, out;
  std::size_t sent = 0, drained = 0;
  std::uint64_t deadline_ns = 0;
  bool responding = false;
  bool draining = false;  // reply sent, write side shut: reading what the client still sends
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
                     const std::string& body, bool head_only) {
  std::string r = "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\n";
  r += "Content-Type: " + type + "\r\n";
  r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  r += "Cache-Control: no-store\r\nConnection: close\r\n";
  if (status == 405) r += "Allow: GET, HEAD\r\n";
  r += "\r\n";
  if (!head_only) r += body;
  return r;
}

std::string error_response(int status, const char* reason) {
  return response(status, reason, "text/plain; charset=utf-8", std::string(reason) + "\n", false);
}

/// The reply to one request (its header complete in `req`).
std::string answer(const std::string& req, const std::string& dir, live_memory& memory) {
  const std::size_t eol = req.find("\r\n");
  const std::string line = req.substr(0, eol);
  const std::size_t sp1 = line.find(' ');
  const std::size_t sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos ||
      line.find(' ', sp2 + 1) != std::string::npos) {
    return error_response(400, "Bad Request");
  }
  const std::string method = line.substr(0, sp1);
  std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string version = line.substr(sp2 + 1);
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return error_response(400, "Bad Request");
  if (method != "GET" && method != "HEAD") return error_response(405, "Method Not Allowed");
  const std::size_t q = target.find('?');
  if (q != std::string::npos) target.resize(q);
  const bool head = method == "HEAD";
  if (target == "/metrics") {
    std::vector<std::string> warnings;
    std::vector<live_process> procs;
    try {
      procs = memory.read(dir, warnings);
    } catch (const tool_error&) {
      return error_response(503, "Service Unavailable");
    }
    return response(200, "OK", "text/plain; version=0.0.4; charset=utf-8", render_metrics(procs),
                    head);
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

}  // namespace

// ---- top
// ------------------------------------------------------------------------------------------

void run_top(const top_args& a) {
  if (!(a.interval_s >= 0.1 && a.interval_s <= 3600)) {
    throw tool_error(exit_usage, "--interval must be between 0.1 and 3600 seconds");
  }
  catch_stop_signals();
  const bool tty = ::isatty(1) != 0;
  const bool color = tty && !a.once && !a.no_color;
  live_memory memory;
  for (;;) {
    std::vector<std::string> warnings;
    const std::vector<live_process> procs = memory.read(a.dir, warnings);
    std::string frame = render_top(a.dir, procs, now_ns(CLOCK_REALTIME), color);
    for (const std::string& w : warnings) frame += "warning: " + w + "\n";
    if (!a.once && tty) frame = "\x1b[H\x1b[2J" + frame;
    std::fwrite(frame.data(), 1, frame.size(), stdout);
    std::fflush(stdout);
    if (a.once || g_stop.load()) break;
    sleep_ns(static_cast<std::uint64_t>(a.interval_s * 1e9));
    if (g_stop.load()) break;
    if (!tty) std::fputs("\n", stdout);
  }
}

// ---- serve
// ----------------------------------------------------------------------------------------

void run_serve(const serve_args& a) {
  if (a.max_connections < 1 || a.max_connections > 4096) {
    throw tool_error(exit_usage, "--max-connections must be between 1 and 4096");
  }
  if (!(a.timeout_s >= 0.1 && a.timeout_s <= 3600)) {
    throw tool_error(exit_usage, "--timeout must be between 0.1 and 3600 seconds");
  }
  {
    std::vector<std::string> warnings;
    read_live_dir(a.dir, warnings);  // DIR must be listable now: a typo fails at once
  }
  const int lfd = listen_on(a.listen);
  catch_stop_signals();
  if (bound_to_any(lfd)) {
    warning("listening on every interface (" + bound_address(lfd) +
                "): any host that can reach this one reads the job's figures (op names, host "
                "names, pids); --listen 127.0.0.1:PORT keeps them on this host",
            "lotus-tool serve");
  }
  std::printf("lotus-tool serve: listening on http://%s/metrics\n", bound_address(lfd).c_str());
  std::fflush(stdout);
  const auto timeout_ns = static_cast<std::uint64_t>(a.timeout_s * 1e9);
  live_memory memory;
  std::vector<connection> conns;
  const std::size_t reject_max = reject_slots(a.max_connections);
  while (!g_stop.load()) {
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
          const std::size_t end = c.in.find("\r\n\r\n");
          if (end != std::string::npos && end + 4 <= k_max_request) {
            c.out = answer(c.in.substr(0, end + 2), a.dir, memory);
            c.responding = true;
          } else if (end != std::string::npos || c.in.size() > k_max_request) {
            c.out = error_response(431, "Request Header Fields Too Large");
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
