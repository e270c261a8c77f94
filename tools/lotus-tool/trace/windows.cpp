// lotus — lotus-tool: windows: --from/--to/--epoch/--ops as a record filter
// SPDX-License-Identifier: MIT
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

#include "format/line_reader.hpp"
#include "trace/trace_dir.hpp"
#include "util/error.hpp"
#include "util/spill.hpp"

namespace lotus_tool {

bool record_filter::keep(std::uint32_t source, const record& r, const batch_ref& b) const {
  if (b.kind == batch_kind::none && !ops.empty() &&
      std::find(ops.begin(), ops.end(), r.name) == ops.end()) {
    return false;
  }
  if (by_epoch && (b.kind == batch_kind::preprocessed || b.kind == batch_kind::wait ||
                   b.kind == batch_kind::consumed)) {
    // The batch records of the epoch itself, even where they overlap its neighbours (prefetch).
    const auto key = std::make_tuple(static_cast<std::uint8_t>(b.kind), source, b.idx, r.start_ns);
    return std::binary_search(epoch_batches.begin(), epoch_batches.end(), key) &&
           r.start_ns >= lo_ns && r.start_ns <= hi_ns;
  }
  return r.start_ns >= lo_ns && r.start_ns <= hi_ns;
}

namespace {

std::string seconds_text(double s) {
  char tmp[64];
  std::snprintf(tmp, sizeof tmp, "%g s", s);
  return tmp;
}

}  // namespace

record_filter make_filter(const trace_dir& dir, const window_options& w) {
  record_filter f;
  std::vector<std::string> parts;
  for (const auto& op : w.ops) {
    if (op.empty()) throw tool_error(exit_usage, "--ops: empty op name");
    f.ops.push_back(op[0] == 'S' ? op : "S" + op);
  }
  if (!f.ops.empty()) {
    std::string list;
    for (const auto& o : f.ops) list += (list.empty() ? "" : ", ") + o.substr(1);
    parts.push_back("ops " + list);
  }
  if (w.from_s && (!(*w.from_s >= 0) || !std::isfinite(*w.from_s))) {
    throw tool_error(exit_usage, "--from must be a number of seconds >= 0");
  }
  if (w.to_s && (!(*w.to_s >= 0) || !std::isfinite(*w.to_s))) {
    throw tool_error(exit_usage, "--to must be a number of seconds >= 0");
  }
  if (w.from_s && w.to_s && *w.to_s <= *w.from_s) {
    throw tool_error(exit_usage, "--to must be later than --from");
  }
  if (!w.epoch && !w.from_s && !w.to_s) {
    f.description = parts.empty() ? "" : parts.front();
    return f;
  }
  // One light pass: the first record's start, and with --epoch the batch records by epoch
  // (the k-th occurrence of a batch index in a directory is epoch k, as everywhere else).
  struct batch_item {
    std::uint64_t key, idx, start, end;  // key: kind | source << 8
  };
  spill_log<batch_item> batches;
  std::uint64_t first = UINT64_MAX;
  for (const auto& file : dir.files) {
    line_reader rd(dir.path_of(file));
    line_reader::line ln;
    record rec;
    batch_ref b;
    while (rd.next(ln)) {
      if (validate_line(ln.text, ln.has_newline, ln.too_long, rec, b) != nullptr) continue;
      first = std::min(first, rec.start_ns);
      if (w.epoch && (b.kind == batch_kind::preprocessed || b.kind == batch_kind::wait ||
                      b.kind == batch_kind::consumed)) {
        const std::uint64_t end =
            rec.dur_ns > UINT64_MAX - rec.start_ns ? UINT64_MAX : rec.start_ns + rec.dur_ns;
        batches.push({static_cast<std::uint64_t>(b.kind) | (std::uint64_t{file.source} << 8), b.idx,
                      rec.start_ns, end});
      }
    }
  }
  if (first == UINT64_MAX) first = 0;
  const auto at = [first](double s) {
    const double ns = s * 1e9;
    const double room = static_cast<double>(UINT64_MAX - first);
    return ns >= room ? UINT64_MAX : first + static_cast<std::uint64_t>(ns);
  };
  if (w.from_s) f.lo_ns = at(*w.from_s);
  if (w.to_s) f.hi_ns = at(*w.to_s);
  if (w.from_s || w.to_s) {
    parts.push_back(seconds_text(w.from_s.value_or(0)) + " to " +
                    (w.to_s ? seconds_text(*w.to_s) : std::string("the end")) +
                    " from the first record");
  }
  if (w.epoch) {
    f.by_epoch = true;
    std::uint64_t lo = UINT64_MAX, hi = 0, epochs = 0;
    scan_epochs(
        batches, [](const batch_item& x) { return std::make_tuple(x.key, x.idx, x.start); },
        [&](const batch_item& x, std::uint64_t epoch) {
          epochs = std::max(epochs, epoch + 1);
          if (epoch != *w.epoch) return;
          f.epoch_batches.emplace_back(static_cast<std::uint8_t>(x.key & 0xff),
                                       static_cast<std::uint32_t>(x.key >> 8), x.idx, x.start);
          lo = std::min(lo, x.start);
          hi = std::max(hi, x.end);
        });
    if (f.epoch_batches.empty()) {
      throw tool_error(exit_invalid,
                       "--epoch " + std::to_string(*w.epoch) + ": the trace has " +
                           (epochs == 0 ? std::string("no batch records")
                                        : std::to_string(epochs) + " epoch(s), numbered from 0"));
    }
    std::sort(f.epoch_batches.begin(), f.epoch_batches.end());
    f.lo_ns = std::max(f.lo_ns, lo);
    f.hi_ns = std::min(f.hi_ns, hi);
    parts.insert(parts.begin(), "epoch " + std::to_string(*w.epoch));
  }
  if (f.lo_ns > f.hi_ns) throw tool_error(exit_usage, "the window holds no time of the trace");
  for (const auto& p : parts) f.description += (f.description.empty() ? "" : ", ") + p;
  return f;
}

}  // namespace lotus_tool
