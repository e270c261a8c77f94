// lotus — lotus-tool format: the names of trace files and sidecars
// SPDX-License-Identifier: MIT
// Header-only (used by trace/, map/ and the Python module's lotus.frame).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lotus_tool {

enum class file_kind : std::uint8_t { worker, main };

/// The library names a file `<prefix>_worker_pid_r<k>_<tid>` (k = 1..64) when the plain name
/// `<prefix>_worker_pid_<tid>` is already taken; the same for main files and for sidecars
/// (`.<prefix>.lotus-meta_r<k>_<pid>`).
inline constexpr unsigned k_max_fresh_name = 64;

namespace detail {

/// 1..18 decimal digits (no sign, no space): a value below 10^18.
inline bool name_number(std::string_view s, std::uint64_t& out) noexcept {
  if (s.empty() || s.size() > 18) return false;
  std::uint64_t v = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  out = v;
  return true;
}

/// The end of a trace or sidecar name: `<id>` (rev = 0) or `r<k>_<id>` (rev = k, 1..64, written
/// without leading zeros). Anything else (`r_7`, `r0_7`, `r01_7`, `r65_7`, `rx_7`, `r1_`) is not.
inline bool parse_id_tail(std::string_view tail, std::uint64_t& id, unsigned& rev) noexcept {
  unsigned k = 0;
  if (!tail.empty() && tail[0] == 'r') {
    const std::size_t us = tail.find('_');
    if (us == std::string_view::npos || us < 2 || us > 3 || tail[1] == '0') return false;
    std::uint64_t kv = 0;
    if (!name_number(tail.substr(1, us - 1), kv) || kv > k_max_fresh_name) return false;
    k = static_cast<unsigned>(kv);
    tail.remove_prefix(us + 1);
  }
  if (!name_number(tail, id)) return false;
  rev = k;
  return true;
}

}  // namespace detail

/// Splits `<prefix>_worker_pid_<id>`, `<prefix>_main_pid_<id>` or their fresh variants
/// `<prefix>_worker_pid_r<k>_<id>` / `<prefix>_main_pid_r<k>_<id>` into prefix, kind, id (the
/// writer's thread id) and rev (k; 0 for the plain name). False if the name is not a trace file
/// name: hidden files (sidecars), an empty prefix, a missing or malformed id.
inline bool parse_trace_file_name(std::string_view name, std::string& prefix, file_kind& kind,
                                  std::uint64_t& id, unsigned& rev) {
  struct marker {
    std::string_view text;
    file_kind kind;
  };
  static constexpr marker k_markers[] = {{"_worker_pid_", file_kind::worker},
                                         {"_main_pid_", file_kind::main}};
  if (!name.empty() && name[0] == '.') return false;  // sidecars and other hidden files
  std::size_t best = std::string_view::npos;
  const marker* found = nullptr;
  for (const auto& m : k_markers) {
    const std::size_t pos = name.rfind(m.text);
    if (pos != std::string_view::npos && (best == std::string_view::npos || pos > best)) {
      best = pos;
      found = &m;
    }
  }
  if (found == nullptr || best == 0) return false;
  if (!detail::parse_id_tail(name.substr(best + found->text.size()), id, rev)) return false;
  prefix.assign(name.substr(0, best));
  kind = found->kind;
  return true;
}

inline bool parse_trace_file_name(std::string_view name, std::string& prefix, file_kind& kind,
                                  std::uint64_t& id) {
  unsigned rev = 0;
  return parse_trace_file_name(name, prefix, kind, id, rev);
}

/// True if `name` is a sidecar of `prefix`: `.<prefix>.lotus-meta_<pid>` or
/// `.<prefix>.lotus-meta_r<k>_<pid>` (the pid itself is read from the file's `pid` line).
inline bool is_sidecar_name(std::string_view name, std::string_view prefix) {
  constexpr std::string_view k_tag = ".lotus-meta_";
  if (name.size() < 1 + prefix.size() + k_tag.size() || name[0] != '.' ||
      name.substr(1, prefix.size()) != prefix ||
      name.substr(1 + prefix.size(), k_tag.size()) != k_tag) {
    return false;
  }
  std::uint64_t id = 0;
  unsigned rev = 0;
  return detail::parse_id_tail(name.substr(1 + prefix.size() + k_tag.size()), id, rev);
}

/// True if `name` is a sidecar of any prefix, `.<prefix>.lotus-meta_<pid>` or
/// `.<prefix>.lotus-meta_r<k>_<pid>`; `prefix` is set to its prefix.
inline bool parse_sidecar_name(std::string_view name, std::string& prefix) {
  constexpr std::string_view k_tag = ".lotus-meta_";
  const std::size_t at = name.rfind(k_tag);
  if (name.empty() || name[0] != '.' || at == std::string_view::npos || at < 2) return false;
  prefix.assign(name.substr(1, at - 1));
  return is_sidecar_name(name, prefix);
}

}  // namespace lotus_tool
