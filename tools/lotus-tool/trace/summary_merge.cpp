// lotus — lotus-tool summaries: several summaries' sources merged into one run's figures
// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <unordered_map>

#include "trace/summary.hpp"
#include "trace/summary_fields.hpp"
#include "util/error.hpp"

namespace lotus_tool {

namespace {

// Chan et al.'s pairwise update of count, mean and the sum of squared deviations.
struct moments_acc {
  std::uint64_t n = 0;
  double sum = 0, mean = 0, m2 = 0, min = 0, max = 0;
  void add(const summary& s) {
    if (s.count == 0) return;
    const double nb = double(s.count), na = double(n);
    const double m2b = s.std * s.std * nb;
    if (n == 0) {
      min = s.min;
      max = s.max;
    } else {
      min = std::min(min, s.min);
      max = std::max(max, s.max);
    }
    const double delta = s.mean - mean;
    n += s.count;
    mean += delta * nb / double(n);
    m2 += m2b + delta * delta * na * nb / double(n);
    sum += s.sum;
  }
  summary result(const log_sketch& k) const {
    summary s;
    s.count = n;
    if (n == 0) return s;
    s.sum = sum;
    s.mean = sum / double(n);
    s.std = std::sqrt(std::max(0.0, m2 / double(n)));
    s.min = min;
    s.max = max;
    const auto q = [&](double p) { return std::clamp(k.quantile(p) / 1e6, min, max); };
    s.median = q(0.5);
    s.p25 = q(0.25);
    s.p75 = q(0.75);
    return s;
  }
};

struct op_merge {
  op_stats o;
  log_sketch k;
};

// A directory entry's name is a summary's: NAME.lsum.
bool summary_name(const std::string& n) {
  const std::string suf = k_summary_suffix;
  return n.size() > suf.size() && n.compare(n.size() - suf.size(), suf.size(), suf) == 0;
}

merged_summaries merge_sources(std::vector<summary_detail::source_in> sources,
                               const std::vector<std::size_t>& dir_of, std::uint64_t files) {
  merged_summaries m;
  m.summaries = files;
  m.epochs_known = !sources.empty();
  for (const summary_detail::source_in& s : sources)
    m.epochs_known = m.epochs_known && s.has_epochs;
  if (m.epochs_known) {
    for (const summary_detail::source_in& s : sources) {
      m.epochs.insert(m.epochs.end(), s.epochs.begin(), s.epochs.end());
      m.epochs_dropped = s.epochs_dropped > UINT64_MAX - m.epochs_dropped
                             ? UINT64_MAX
                             : m.epochs_dropped + s.epochs_dropped;  // untrusted counts
    }
  }
  stats_result& r = m.stats;
  // Statistics: sums, minima and maxima, merged sketches.
  std::map<std::string, op_merge> ops;
  moments_acc pre, wait, delay;
  log_sketch pre_k, wait_k, delay_k;
  std::vector<std::uint8_t> hll;
  r.first_start_ns = UINT64_MAX;
  const std::size_t max_ops = default_max_ops();
  std::size_t named = 0;
  for (const summary_detail::source_in& s : sources) {
    const stats_result& x = s.r;
    r.records += x.records;
    r.skipped_lines += x.skipped_lines;
    r.files += x.files;
    r.worker_files += x.worker_files;
    r.main_files += x.main_files;
    r.epochs = std::max(r.epochs, x.epochs);
    if (x.first_start_ns != 0) r.first_start_ns = std::min(r.first_start_ns, x.first_start_ns);
    r.main_elapsed_ms += x.main_elapsed_ms;
    r.queued += x.queued;
    r.consumed += x.consumed;
    r.out_of_order += x.out_of_order;
    r.pooled_ops_records += x.pooled_ops_records;
    if (!x.pooled_hll.empty()) {
      if (hll.empty()) hll.assign(x.pooled_hll.size(), 0);
      for (std::size_t i = 0; i < hll.size(); ++i) hll[i] = std::max(hll[i], x.pooled_hll[i]);
    }
    for (std::size_t i = 0; i < x.ops.size(); ++i) {
      const op_stats& o = x.ops[i];
      std::string name = o.name;
      if (!o.pooled && ops.find(name) == ops.end() && named >= max_ops) name = k_other_ops_name;
      auto [it, fresh] = ops.try_emplace(name);
      op_merge& a = it->second;
      if (fresh) {
        a.o.name = name;
        a.o.min_ns = o.min_ns;
        named += name != k_other_ops_name ? 1 : 0;
      }
      a.o.pooled = a.o.pooled || o.pooled || name == k_other_ops_name;
      a.o.count += o.count;
      a.o.sum_ns = o.sum_ns > UINT64_MAX - a.o.sum_ns ? UINT64_MAX : a.o.sum_ns + o.sum_ns;
      a.o.min_ns = std::min(a.o.min_ns, o.min_ns);
      a.o.max_ns = std::max(a.o.max_ns, o.max_ns);
      a.o.lt_10ms += o.lt_10ms;
      a.o.lt_100us += o.lt_100us;
      a.k.merge(x.op_sketches[i]);
    }
    pre.add(x.preprocessing);
    pre_k.merge(x.preprocessing_sketch);
    wait.add(x.wait.s);
    wait_k.merge(x.wait_sketch);
    delay.add(x.delay.s);
    delay_k.merge(x.delay_sketch);
    r.wait.eq_1us += x.wait.eq_1us;
    r.wait.lt_1ms += x.wait.lt_1ms;
    r.wait.gt_1ms += x.wait.gt_1ms;
    r.wait.gt_500ms += x.wait.gt_500ms;
    r.delay.lt_250ms += x.delay.lt_250ms;
    r.delay.gt_500ms += x.delay.gt_500ms;
    r.delay.unmatched_preprocessed += x.delay.unmatched_preprocessed;
    r.delay.unmatched_consumed += x.delay.unmatched_consumed;
  }
  if (r.first_start_ns == UINT64_MAX) r.first_start_ns = 0;
  r.max_ops = max_ops;
  r.pooled_op_names = hll_estimate(hll);
  for (auto& [name, a] : ops) {
    op_stats o = a.o;
    o.sum = double(o.sum_ns) / 1e6;
    o.mean = o.sum / double(o.count);
    const double lo = double(o.min_ns) / 1e6, hi = double(o.max_ns) / 1e6;
    o.p50 = std::clamp(a.k.quantile(0.5) / 1e6, lo, hi);
    o.p90 = std::clamp(a.k.quantile(0.9) / 1e6, lo, hi);
    o.p99 = std::clamp(a.k.quantile(0.99) / 1e6, lo, hi);
    o.share_lt_10ms = double(o.lt_10ms) / double(o.count);
    o.share_lt_100us = double(o.lt_100us) / double(o.count);
    r.ops.push_back(std::move(o));
    r.op_sketches.push_back(std::move(a.k));
  }
  // The pooled row last, the others by name (map order); sketches alongside.
  for (std::size_t i = 0; i + 1 < r.ops.size(); ++i) {
    if (r.ops[i].pooled) {
      std::rotate(r.ops.begin() + long(i), r.ops.begin() + long(i) + 1, r.ops.end());
      std::rotate(r.op_sketches.begin() + long(i), r.op_sketches.begin() + long(i) + 1,
                  r.op_sketches.end());
      break;
    }
  }
  r.preprocessing = r.preprocessing_before = pre.result(pre_k);
  r.wait.s = wait.result(wait_k);
  r.delay.s = delay.result(delay_k);
  r.preprocessing_sketch = std::move(pre_k);
  r.wait_sketch = std::move(wait_k);
  r.delay_sketch = std::move(delay_k);
  // The trace: parts merged as scan_trace_dirs merges directories.
  std::vector<trace_dir> parts;
  std::vector<rank_stats> rows;
  rank_op_table t;
  std::unordered_map<std::string, std::uint32_t> op_index;
  const auto global_op = [&](const std::string& name) {
    auto it = op_index.find(name);
    if (it != op_index.end()) return it->second;
    const auto i = static_cast<std::uint32_t>(t.ops.size());
    t.ops.push_back(name);
    op_index.emplace(name, i);
    return i;
  };
  const auto map_cells = [&](const summary_detail::source_in& s,
                             const std::vector<op_cell>& cells) {
    std::vector<op_cell> out;
    for (const op_cell& c : cells) {
      if (s.r.ops[c.op].pooled) continue;
      out.push_back(op_cell{global_op(s.r.ops[c.op].name), c.count, c.sum_ns});
    }
    return out;
  };
  for (std::size_t k = 0; k < sources.size(); ++k) {
    summary_detail::source_in& s = sources[k];
    rows.push_back(s.r.ranks.front());
    t.ranks.push_back(map_cells(s, s.rank_cells));
    for (const auto& cells : s.file_cells) {
      t.files.push_back(map_cells(s, cells));
      t.file_source.push_back(static_cast<std::uint32_t>(k));
    }
    r.file_batches.insert(r.file_batches.end(), s.file_batches.begin(), s.file_batches.end());
    parts.push_back(std::move(s.part));
  }
  m.dir = merge_trace_parts(std::move(parts), dir_of);
  if (rows.size() > 1) {
    for (std::size_t k = 0; k < rows.size(); ++k) rows[k].label = m.dir.sources[k].label;
    r.slowest_rank = slowest_rank_of(rows);
    r.rank_ops = std::move(t);
    r.straggler = analyze_straggler(rows, r.rank_ops);
    r.ranks = std::move(rows);
  }
  return m;
}

}  // namespace

bool names_summaries(const std::vector<std::string>& paths) {
  std::size_t yes = 0;
  for (const auto& p : paths) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) continue;  // the reader reports it
    if (S_ISREG(st.st_mode)) {
      ++yes;
    } else if (S_ISDIR(st.st_mode)) {
      DIR* d = ::opendir(p.c_str());
      if (d == nullptr) continue;
      bool any = false;
      while (const dirent* e = ::readdir(d)) {
        if (summary_name(e->d_name)) {
          any = true;
          break;
        }
      }
      ::closedir(d);
      yes += any ? 1 : 0;
    }
  }
  if (yes != 0 && yes != paths.size()) {
    throw tool_error(exit_usage,
                     "give either trace directories or summaries (files, or directories of "
                     "*.lsum files), not both");
  }
  return yes != 0;
}

void refuse_on_summaries(const input_args& in, bool remove_outliers) {
  const char* what = nullptr;
  if (in.window.epoch) what = "--epoch";
  if (in.window.from_s || in.window.to_s) what = "--from/--to";
  if (!in.window.ops.empty()) what = "--ops";
  if (remove_outliers) what = "--remove-outliers";
  if (what != nullptr) {
    throw tool_error(exit_usage, std::string(what) +
                                     " needs the records themselves: a summary keeps none; give "
                                     "the trace directories");
  }
}

merged_summaries read_summaries(const std::vector<std::string>& paths) {
  // The files: each path, or a directory's *.lsum files in name order.
  std::vector<std::string> files;
  for (const auto& p : paths) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) {
      throw tool_error(exit_io, p + ": " + std::strerror(errno));
    }
    if (!S_ISDIR(st.st_mode)) {
      files.push_back(p);
      continue;
    }
    DIR* d = ::opendir(p.c_str());
    if (d == nullptr) throw tool_error(exit_io, p + ": " + std::strerror(errno));
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(d)) {
      if (summary_name(e->d_name)) names.push_back(e->d_name);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    for (const auto& n : names) files.push_back(p + "/" + n);
  }
  std::vector<summary_detail::source_in> sources;
  std::vector<std::size_t> dir_of;
  std::size_t dir_base = 0;
  for (const auto& f : files)
    summary_detail::parse_summary(f, summary_detail::read_bounded(f), sources, dir_of, dir_base);
  return merge_sources(std::move(sources), dir_of, files.size());
}

merged_summaries read_summary_text(const std::string& label, const std::string& text) {
  if (text.size() > k_summary_max_bytes) summary_detail::bad(label, "too large");
  std::vector<summary_detail::source_in> sources;
  std::vector<std::size_t> dir_of;
  std::size_t dir_base = 0;
  summary_detail::parse_summary(label, text, sources, dir_of, dir_base);
  return merge_sources(std::move(sources), dir_of, 1);
}

}  // namespace lotus_tool
