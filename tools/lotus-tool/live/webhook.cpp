// lotus — lotus-tool live: the Alertmanager webhook: a firing alert asks the job for a capture
// SPDX-License-Identifier: MIT
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "live/capture.hpp"
#include "live/serve.hpp"
#include "util/diag.hpp"
#include "util/error.hpp"
#include "util/output.hpp"

namespace lotus_tool {

namespace {

/// The webhook's bounds: a notification's JSON nesting, and the gap between two captures it asks
/// for.
constexpr int k_max_depth = 16;
constexpr std::uint64_t k_capture_gap_ns = 10000000000u;

/// Alert text for a capture's reason: printable ASCII kept, other bytes and backslashes as
/// `\xHH`, at most `max` bytes (never a cut escape).
std::string alert_text(const std::string& v, std::size_t max) {
  std::string out;
  for (const char c : v) {
    const auto u = static_cast<unsigned char>(c);
    std::string piece(1, c);
    if (u < 0x20 || u > 0x7e || c == '\\') {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", u);
      piece = hex;
    }
    if (out.size() + piece.size() > max) break;
    out += piece;
  }
  return out;
}

/// The deepest nesting of `[`/`{` in a JSON text (strings skipped), to refuse deep documents
/// before parsing them.
int json_depth(const std::string& s) {
  int depth = 0, most = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      most = std::max(most, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return most;
}

}  // namespace

webhook_result capture_on_alert(const std::string& dir, const std::string& body,
                                std::uint64_t& last_ns, std::uint64_t now_ns,
                                const std::vector<live_process>& procs) {
  using nlohmann::json;
  if (json_depth(body) > k_max_depth) {
    return {400, "not an Alertmanager notification: JSON nested deeper than " +
                     std::to_string(k_max_depth)};
  }
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return {400, "not an Alertmanager notification: a JSON object expected"};
  }
  const auto alerts = j.find("alerts");
  if (alerts == j.end() || !alerts->is_array()) {
    return {400, "not an Alertmanager notification: no \"alerts\" array"};
  }
  std::vector<const json*> firing;
  for (const json& a : *alerts) {
    if (!a.is_object()) return {400, "not an Alertmanager notification: an alert is not an object"};
    const auto status = a.find("status");
    if (status != a.end() && status->is_string() && *status == "firing") firing.push_back(&a);
  }
  if (firing.empty()) return {200, "no firing alert: no capture requested"};
  if (last_ns != 0 && now_ns >= last_ns && now_ns - last_ns < k_capture_gap_ns) {
    return {200, "a capture was requested " +
                     format_number("%.1f", static_cast<double>(now_ns - last_ns) / 1e9) +
                     " s ago: not again within 10 s"};
  }
  // Why: the first firing alert's name and where (its host, pid, worker labels).
  const auto label_of = [](const json& a, const char* key) {
    const auto labels = a.find("labels");
    if (labels == a.end() || !labels->is_object()) return std::string();
    const auto v = labels->find(key);
    return v != labels->end() && v->is_string() ? v->get<std::string>() : std::string();
  };
  const json& first = *firing.front();
  std::string why = "alert " + label_of(first, "alertname").substr(0, 64);
  for (const char* key : {"host", "rank", "pid", "worker"}) {
    const std::string v = label_of(first, key);
    if (!v.empty()) why += std::string(" ") + key + "=" + v.substr(0, 40);
  }
  if (firing.size() > 1) why += " (+" + std::to_string(firing.size() - 1) + " more firing)";
  // When the anomaly began: the earliest batch (or wait) in progress the firing alerts name.
  std::uint64_t began = 0;
  for (const json* a : firing) {
    const std::string pid = label_of(*a, "pid"), worker = label_of(*a, "worker");
    const std::string host = label_of(*a, "host");
    for (const live_process& p : procs) {
      if (p.ended() || std::to_string(p.pid) != pid || (!host.empty() && p.host != host)) continue;
      const live_inflight* x = nullptr;
      if (!worker.empty()) {
        for (const live_worker& w : p.workers) {
          if (std::to_string(w.tid) == worker && w.batch.active) x = &w.batch;
        }
      } else if (p.waiting.active) {
        x = &p.waiting;
      }
      if (x != nullptr && x->since_ns != 0 && (began == 0 || x->since_ns < began)) {
        began = x->since_ns;
      }
    }
  }
  capture_args ca;
  ca.dir = dir;
  ca.began_ns = began;
  ca.reason = alert_text(why, 180);
  try {
    const capture_request r = request_capture(ca);
    last_ns = now_ns;
    const std::string since =
        began != 0 && began < r.end_ns
            ? format_number("%.1f", static_cast<double>(r.end_ns - began) / 1e9) +
                  " s before its end, when the batch or wait in progress began"
            : std::string("at its end");
    note("capture " + r.id + " requested by an alert (" + ca.reason + "); its anomaly began " +
             since,
         "lotus-tool serve");
    return {200, "capture " + r.id + " requested: " + printable(dir) + "/capture-" + r.id};
  } catch (const tool_error& e) {
    return {500, std::string("cannot request a capture: ") + printable(e.what())};
  }
}

}  // namespace lotus_tool
