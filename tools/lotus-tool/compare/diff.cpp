// lotus — lotus-tool diff: two runs compared op by op (compare/diff.hpp)
// SPDX-License-Identifier: MIT
#include "compare/diff.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "model/run.hpp"
#include "util/diag.hpp"
#include "util/error.hpp"
#include "util/format.hpp"
#include "util/json_dump.hpp"
#include "util/output.hpp"

namespace lotus_tool {

namespace {

double median_of(std::vector<double>& v) {  // reorders v
  if (v.empty()) return 0;
  const std::size_t h = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(h), v.end());
  const double hi = v[h];
  if (v.size() % 2) return hi;
  const double lo = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(h));
  return (lo + hi) / 2;
}

// One resample's median (with replacement), in `buf`.
double resampled_median(const std::vector<double>& v, seeded_rng& rng, std::vector<double>& buf) {
  const std::uint64_t n = v.size();
  buf.resize(v.size());
  for (std::uint64_t i = 0; i < n; ++i)
    buf[static_cast<std::size_t>(i)] = v[static_cast<std::size_t>(rng.below(n))];
  return median_of(buf);
}

// At most `cap` values of `v`, chosen uniformly with a seeded generator (all when fewer): the
// bootstrap's cost is resamples × sample size.
std::vector<double> capped(const std::vector<double>& v, std::size_t cap, std::uint64_t seed) {
  if (v.size() <= cap) return v;
  std::vector<double> out(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(cap));
  seeded_rng rng(seed);
  for (std::size_t i = cap; i < v.size(); ++i) {
    const std::uint64_t j = rng.below(i + 1);
    if (j < cap) out[static_cast<std::size_t>(j)] = v[i];
  }
  return out;
}

constexpr std::size_t k_bootstrap_cap = 4096;

// slower / faster / same for a change where larger is worse (`higher_is_worse`) or better.
std::string judge(double change, std::optional<double> lo, std::optional<double> hi,
                  double threshold, bool higher_is_worse) {
  if (std::isnan(change)) return "n/a";
  if (std::fabs(change) < threshold) return "same";
  // From zero to something (change +inf): a change whatever the interval (resamples of a zero
  // median have no ratio).
  if (std::isfinite(change) && lo && hi && *lo <= 0 && *hi >= 0) return "same";
  const bool up = change > 0;
  return up == higher_is_worse ? "slower" : "faster";
}

// b / a - 1; from a zero base: 0 when b is zero too, +inf when b grew from nothing (a 0 ms op
// that now takes 50 ms is not "+0.0 % same").
double relative_change(double a, double b) {
  if (a > 0) return b / a - 1.0;
  if (a == 0 && b == 0) return 0.0;
  if (a == 0 && b > 0) return std::numeric_limits<double>::infinity();
  return std::nan("");
}

std::uint64_t name_seed(std::uint64_t seed, const std::string& name) {
  std::uint64_t h = 1469598103934665603ULL;  // FNV-1a: a per-op stream independent of order
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return seed ^ h;
}

double batch_delay_ms(const run_digest& d) { return d.stats.delay.s.mean; }

std::vector<double> all_batches(const run_digest& d) {
  std::vector<double> v;
  for (const auto& e : d.batch_ms) v.insert(v.end(), e.begin(), e.end());
  return v;
}

}  // namespace

std::pair<double, double> bootstrap_median_ratio(const std::vector<double>& a,
                                                 const std::vector<double>& b, unsigned resamples,
                                                 std::uint64_t seed) {
  if (a.empty() || b.empty() || resamples == 0) return {0.0, 0.0};
  seeded_rng rng(seed);
  std::vector<double> r, buf;
  r.reserve(resamples);
  for (unsigned i = 0; i < resamples; ++i) {
    const double ma = resampled_median(a, rng, buf);
    const double mb = resampled_median(b, rng, buf);
    r.push_back(ma > 0 ? mb / ma - 1.0 : 0.0);
  }
  std::sort(r.begin(), r.end());
  return {quantile_sorted(r, 0.025), quantile_sorted(r, 0.975)};
}

namespace {

// The runs of one side as one digest: ops with every run's sample, the median of the runs'
// medians (and mean of means), batches, epochs and steps of all runs.
run_digest pooled(const std::vector<run_digest>& runs) {
  if (runs.size() == 1) return runs.front();
  run_digest d = runs.front();
  std::map<std::string, std::vector<const op_digest*>> by_name;
  for (const auto& r : runs)
    for (const auto& o : r.ops) by_name[o.name].push_back(&o);
  d.ops.clear();
  for (const auto& kv : by_name) {
    op_digest o;
    o.name = kv.first;
    std::vector<double> p50, p90;
    double mean = 0;
    for (const op_digest* x : kv.second) {
      o.count += x->count;
      mean += x->mean_ms;
      p50.push_back(x->p50_ms);
      p90.push_back(x->p90_ms);
      o.sample_ms.insert(o.sample_ms.end(), x->sample_ms.begin(), x->sample_ms.end());
    }
    o.mean_ms = mean / static_cast<double>(kv.second.size());
    o.p50_ms = median_of(p50);
    o.p90_ms = median_of(p90);
    d.ops.push_back(std::move(o));
  }
  double delay = 0;
  for (std::size_t k = 1; k < runs.size(); ++k) {
    const run_digest& r = runs[k];
    d.batch_ms.insert(d.batch_ms.end(), r.batch_ms.begin(), r.batch_ms.end());
    d.step_ms.insert(d.step_ms.end(), r.step_ms.begin(), r.step_ms.end());
    d.gpu_step_ms.insert(d.gpu_step_ms.end(), r.gpu_step_ms.begin(), r.gpu_step_ms.end());
    d.gpu_handovers += r.gpu_handovers;
    d.gpu_idle_ms += r.gpu_idle_ms;
    d.epochs.insert(d.epochs.end(), r.epochs.begin(), r.epochs.end());
    d.stats.consumed += r.stats.consumed;
    d.causes.add(r.causes);
  }
  for (const auto& r : runs) delay += r.stats.delay.s.mean;
  d.stats.delay.s.mean = delay / static_cast<double>(runs.size());
  return d;
}

// Per op: the between-run spread of its median on the log scale, 1.96 × the standard error of
// the difference of the two sides' means of log medians (a side of one run borrows the other's
// spread). Ops seen in fewer than two runs of both sides get none.
std::map<std::string, double> between_run_spread(const std::vector<run_digest>& base,
                                                 const std::vector<run_digest>& next) {
  auto logs = [](const std::vector<run_digest>& runs) {
    std::map<std::string, std::vector<double>> m;
    for (const auto& r : runs)
      for (const auto& o : r.ops)
        if (o.p50_ms > 0) m[o.name].push_back(std::log(o.p50_ms));
    return m;
  };
  auto var = [](const std::vector<double>& v) {
    if (v.size() < 2) return std::nan("");
    double m = 0, s = 0;
    for (double x : v) m += x;
    m /= static_cast<double>(v.size());
    for (double x : v) s += (x - m) * (x - m);
    return s / static_cast<double>(v.size() - 1);
  };
  const auto a = logs(base), b = logs(next);
  std::map<std::string, double> out;
  for (const auto& kv : a) {
    const auto it = b.find(kv.first);
    if (it == b.end()) continue;
    double va = var(kv.second), vb = var(it->second);
    if (std::isnan(va) && std::isnan(vb)) continue;
    if (std::isnan(va)) va = vb;
    if (std::isnan(vb)) vb = va;
    out[kv.first] = 1.96 * std::sqrt(va / static_cast<double>(kv.second.size()) +
                                     vb / static_cast<double>(it->second.size()));
  }
  return out;
}

// Ops with at least this many durations a side take part in estimating the machine shift.
constexpr std::uint64_t k_shift_min_count = 20;

double to_log(double change) { return std::log1p(std::max(change, -0.999999)); }
double from_log(double x) { return std::expm1(x); }

diff_result diff_core(const run_digest& base, const run_digest& next, const diff_options& opt,
                      const std::map<std::string, double>* spread, std::size_t base_runs,
                      std::size_t new_runs);

}  // namespace

diff_result diff_runs(const run_digest& base, const run_digest& next, const diff_options& opt) {
  return diff_core(base, next, opt, nullptr, 1, 1);
}

diff_result diff_repeated(const std::vector<run_digest>& base, const std::vector<run_digest>& next,
                          const diff_options& opt) {
  if (base.empty() || next.empty()) throw tool_error(exit_usage, "diff: a side has no run");
  if (base.size() == 1 && next.size() == 1) return diff_runs(base.front(), next.front(), opt);
  const std::map<std::string, double> spread = between_run_spread(base, next);
  return diff_core(pooled(base), pooled(next), opt, &spread, base.size(), next.size());
}

namespace {

diff_result diff_core(const run_digest& base, const run_digest& next, const diff_options& opt,
                      const std::map<std::string, double>* spread, std::size_t base_runs,
                      std::size_t new_runs) {
  diff_result out;
  out.threshold = opt.threshold;
  out.resamples = opt.resamples;
  out.base_runs = base_runs;
  out.new_runs = new_runs;
  std::map<std::string, std::pair<const op_digest*, const op_digest*>> by_name;
  for (const auto& o : base.ops) by_name[o.name].first = &o;
  for (const auto& o : next.ops) by_name[o.name].second = &o;
  for (const auto& kv : by_name) {
    op_change c;
    c.name = kv.first;
    const op_digest* a = kv.second.first;
    const op_digest* b = kv.second.second;
    auto side = [](const op_digest& o) {
      return side_stats{o.count, o.mean_ms, o.p50_ms, o.p90_ms};
    };
    if (a) c.base = side(*a);
    if (b) c.next = side(*b);
    if (!a || !b) {
      c.verdict = a ? "only_base" : "only_new";
      out.ops.push_back(std::move(c));
      continue;
    }
    c.change = relative_change(a->p50_ms, b->p50_ms);
    c.mean_change = relative_change(a->mean_ms, b->mean_ms);
    const auto ci = bootstrap_median_ratio(capped(a->sample_ms, k_bootstrap_cap, opt.seed),
                                           capped(b->sample_ms, k_bootstrap_cap, opt.seed + 1),
                                           opt.resamples, name_seed(opt.seed, c.name));
    c.lo = ci.first;
    c.hi = ci.second;
    if (std::isinf(c.change)) c.lo = c.hi = std::nan("");  // no ratio to resample from zero
    c.between_run = std::log1p(opt.allowance);
    if (spread != nullptr) {
      const auto it = spread->find(c.name);
      c.between_run = it != spread->end() ? it->second : std::log1p(opt.allowance);
    }
    out.ops.push_back(std::move(c));
  }

  // The machine: a shift every op admits. The ops' median change (log scale) is that shift when
  // it lies in every op's widened interval; else some op moved apart from the others and no
  // shift is taken out. Ops with few durations or no interval do not constrain it. With an even
  // number of ops the median is one of the two middle changes (the smaller), never their mean:
  // half the ops 30 % slower and half unchanged must not give a 14 % "shift" that both halves'
  // widened intervals admit and that hides the change.
  {
    double lo = -std::numeric_limits<double>::infinity(), hi = -lo;
    std::vector<double> x;
    for (const auto& c : out.ops) {
      if (!c.base || !c.next || !std::isfinite(c.change) || !std::isfinite(c.lo) ||
          !std::isfinite(c.hi) || c.base->count < k_shift_min_count ||
          c.next->count < k_shift_min_count) {
        continue;
      }
      x.push_back(to_log(c.change));
      lo = std::max(lo, to_log(c.lo) - c.between_run);
      hi = std::min(hi, to_log(c.hi) + c.between_run);
    }
    if (x.size() >= 2) {
      std::sort(x.begin(), x.end());
      const std::size_t h = x.size() / 2;
      const double m = x.size() % 2 != 0 || std::fabs(x[h]) < std::fabs(x[h - 1]) ? x[h] : x[h - 1];
      if (lo <= m && m <= hi) out.machine_shift = from_log(m);
    }
  }
  const double shift = out.machine_shift ? to_log(*out.machine_shift) : 0.0;
  for (auto& c : out.ops) {
    if (!c.base || !c.next) continue;
    if (!std::isfinite(c.change) || !std::isfinite(c.lo) || !std::isfinite(c.hi)) {
      c.own_change = c.change;
      c.own_lo = c.lo;
      c.own_hi = c.hi;
      c.verdict = judge(c.change, c.lo, c.hi, opt.threshold, true);
      continue;
    }
    c.own_change = from_log(to_log(c.change) - shift);
    c.own_lo = from_log(to_log(c.lo) - shift - c.between_run);
    c.own_hi = from_log(to_log(c.hi) - shift + c.between_run);
    c.verdict = judge(c.own_change, c.own_lo, c.own_hi, opt.threshold, true);
  }
  {
    std::string s;
    if (base_runs == 1 && new_runs == 1) {
      s = "one run a side: within-run noise (bootstrap) and an allowance of " +
          pct(opt.allowance, 0, " ") +
          " for the machine's drift between runs (give repeated runs, --base A --base B ..., "
          "to measure it)";
    } else {
      s = std::to_string(base_runs) + " base run(s) and " + std::to_string(new_runs) +
          " new run(s): within-run noise (bootstrap over the pooled durations) and each op's "
          "between-run spread of its median";
    }
    s += out.machine_shift
             ? "; a machine shift of " + format_number("%+.1f %%", 100 * *out.machine_shift) +
                   " shared by every op is taken out"
             : "; no shift is shared by every op (nothing taken out)";
    out.basis = s;
  }

  const auto rel = relative_change;
  auto add = [&](const char* name, const char* unit, double a, double b, double change,
                 std::optional<double> lo, std::optional<double> hi, bool higher_is_worse,
                 double threshold) {
    run_change r;
    r.name = name;
    r.unit = unit;
    r.base = a;
    r.next = b;
    r.change = change;
    r.lo = lo;
    r.hi = hi;
    r.verdict = judge(change, lo, hi, threshold, higher_is_worse);
    out.run.push_back(std::move(r));
  };
  const bool batches = base.has_batches() && next.has_batches();
  {
    std::vector<double> a = all_batches(base), b = all_batches(next);
    if (!a.empty() && !b.empty()) {
      const auto ci = bootstrap_median_ratio(capped(a, k_bootstrap_cap, opt.seed),
                                             capped(b, k_bootstrap_cap, opt.seed + 1),
                                             opt.resamples, name_seed(opt.seed, "batch"));
      const double ma = median_of(a), mb = median_of(b);
      add("batch_preprocessing_p50_ms", "ms", ma, mb, rel(ma, mb), ci.first, ci.second, true,
          opt.threshold);
    }
  }
  if (batches) {
    // Shares are compared by their difference (points / 100), with half the threshold: 10 %
    // of an epoch spent waiting is a change worth a verdict, 1 point is not.
    add("wait_share", "share", base.wait_share(), next.wait_share(),
        next.wait_share() - base.wait_share(), std::nullopt, std::nullopt, true, opt.threshold / 2);
    add("batch_delay_ms", "ms", batch_delay_ms(base), batch_delay_ms(next),
        rel(batch_delay_ms(base), batch_delay_ms(next)), std::nullopt, std::nullopt, true,
        opt.threshold);
    const double oa = static_cast<double>(base.out_of_order());
    const double ob = static_cast<double>(next.out_of_order());
    const double ba = static_cast<double>(base.stats.consumed);
    const double bb = static_cast<double>(next.stats.consumed);
    // Out-of-order arrivals per consumed batch, compared like a share.
    const double sa = ba > 0 ? oa / ba : 0, sb = bb > 0 ? ob / bb : 0;
    add("out_of_order", "count", oa, ob, sb - sa, std::nullopt, std::nullopt, true,
        opt.threshold / 2);
    add("epoch_seconds", "s", base.epoch_seconds(), next.epoch_seconds(),
        rel(base.epoch_seconds(), next.epoch_seconds()), std::nullopt, std::nullopt, true,
        opt.threshold);
    add("batches_per_second", "1/s", base.batches_per_second(), next.batches_per_second(),
        rel(base.batches_per_second(), next.batches_per_second()), std::nullopt, std::nullopt,
        false, opt.threshold);
  }
  if (base.causes.batches > 0 && next.causes.batches > 0) {
    // Causes of batch time (sidecar `batchres` lines): shares compared by their difference, as
    // wait_share. More time on a CPU is better (less waiting, less blocking).
    const cause_shares a = shares_of(base.causes), b = shares_of(next.causes);
    add("cpu_share", "share", a.cpu, b.cpu, b.cpu - a.cpu, std::nullopt, std::nullopt, false,
        opt.threshold / 2);
    add("cpu_wait_share", "share", a.cpu_wait, b.cpu_wait, b.cpu_wait - a.cpu_wait, std::nullopt,
        std::nullopt, true, opt.threshold / 2);
    add("blocked_share", "share", a.blocked, b.blocked, b.blocked - a.blocked, std::nullopt,
        std::nullopt, true, opt.threshold / 2);
  }
  return out;
}

}  // namespace

namespace {

std::string pad(std::string s, std::size_t w, bool left = false) {
  // Width counts bytes; names are printable() first, so no control byte moves the cursor.
  if (s.size() >= w) return s;
  const std::string fill(w - s.size(), ' ');
  return left ? s + fill : fill + s;
}

bool is_share(const run_change& r) { return r.unit == std::string("share"); }

}  // namespace

std::string diff_text(const diff_result& d) {
  std::string s;
  std::size_t w = 4;
  // Op names as every command's text shows them: without the records' leading 'S'.
  const auto shown = [](const std::string& n) {
    return printable(!n.empty() && n[0] == 'S' ? std::string_view(n).substr(1) : n);
  };
  for (const auto& o : d.ops) w = std::max(w, shown(o.name).size());
  w = std::min<std::size_t>(w, 48);
  s += pad("op", w, true) + pad("base n", 9) + pad("new n", 9) + pad("base mean", 11) +
       pad("new mean", 11) + pad("mean", 9) + pad("base p50", 11) + pad("new p50", 11) +
       pad("base p90", 11) + pad("new p90", 11) + pad("p50 change", 12) + "  " +
       pad("95 % interval", 22, true) + pad("own change", 12) + "  " +
       pad("judged interval", 22, true) + "verdict\n";
  for (const auto& o : d.ops) {
    auto num = [](const std::optional<side_stats>& x, double side_stats::*f) {
      return x ? format_number("%.4f", (*x).*f) : std::string("-");
    };
    auto cnt = [](const std::optional<side_stats>& x) {
      return x ? std::to_string(x->count) : std::string("-");
    };
    const bool both = o.base && o.next;
    s +=
        pad(shown(o.name), w, true) + pad(cnt(o.base), 9) + pad(cnt(o.next), 9) +
        pad(num(o.base, &side_stats::mean), 11) + pad(num(o.next, &side_stats::mean), 11) +
        pad(both ? signed_pct(o.mean_change) : "-", 9) + pad(num(o.base, &side_stats::p50), 11) +
        pad(num(o.next, &side_stats::p50), 11) + pad(num(o.base, &side_stats::p90), 11) +
        pad(num(o.next, &side_stats::p90), 11) + pad(both ? signed_pct(o.change) : "-", 12) + "  " +
        pad(both ? "[" + signed_pct(o.lo) + ", " + signed_pct(o.hi) + "]" : "-", 22, true) +
        pad(both ? signed_pct(o.own_change) : "-", 12) + "  " +
        pad(both ? "[" + signed_pct(o.own_lo) + ", " + signed_pct(o.own_hi) + "]" : "-", 22, true) +
        o.verdict + "\n";
  }
  s += "(times in ms; change = new p50 / base p50 - 1, mean: the same for the means; interval: "
       "seeded bootstrap of the medians, " +
       std::to_string(d.resamples) +
       " resamples; own change: without the machine shift, judged "
       "on its interval widened by the between-run variation; same when |own change| < " +
       pct(d.threshold, 0, " ") + " or the judged interval holds 0)\n";
  s += "verdicts rest on: " + d.basis + "\n";
  if (!d.run.empty()) {
    s += "\nrun" + std::string(27, ' ') + pad("base", 12) + pad("new", 12) + pad("change", 12) +
         "  verdict\n";
    for (const auto& r : d.run) {
      const bool share = is_share(r) || r.name == "out_of_order";
      auto val = [&](double v) {
        if (is_share(r)) return pct(v, 1, " ");
        if (r.unit == std::string("count")) return format_number("%.0f", v);
        return format_number("%.4f", v);
      };
      // A count's change is a count; its verdict rests on the change of its share of the
      // batches, which is said beside it.
      std::string change = r.name == "out_of_order"
                               ? format_number("%+.0f", r.next - r.base) + " (" +
                                     format_number("%+.1f pt of batches", 100 * r.change) + ")"
                           : share ? format_number("%+.1f pt", 100 * r.change)
                                   : signed_pct(r.change);
      if (r.lo && r.hi) change += " [" + signed_pct(*r.lo) + ", " + signed_pct(*r.hi) + "]";
      s += pad(r.name + " (" + r.unit + ")", 30, true) + pad(val(r.base), 12) +
           pad(val(r.next), 12) + "  " + pad(change, 10) + "  " + r.verdict + "\n";
    }
  }
  return s;
}

std::string diff_csv(const diff_result& d) {
  std::string s =
      "kind,name,base_count,base_mean_ms,base_p50_ms,base_p90_ms,new_count,new_mean_ms,"
      "new_p50_ms,new_p90_ms,mean_change,base,new,change,ci_low,ci_high,verdict\n";
  auto num = [](double v) {
    std::string o;
    append_double(o, v);
    return o;
  };
  for (const auto& o : d.ops) {
    s += "op," + csv_field(o.name);
    for (const auto* side : {&o.base, &o.next}) {
      if (*side) {
        s += "," + std::to_string((*side)->count) + "," + num((*side)->mean) + "," +
             num((*side)->p50) + "," + num((*side)->p90);
      } else {
        s += ",,,,";
      }
    }
    if (o.base && o.next) {
      s += "," + num(o.mean_change) + ",,," + num(o.change) + "," + num(o.lo) + "," + num(o.hi);
    } else {
      s += ",,,,,,";
    }
    s += "," + o.verdict + "\n";
  }
  for (const auto& r : d.run) {
    s += "run," + r.name + ",,,,,,,,,," + num(r.base) + "," + num(r.next) + "," + num(r.change) +
         "," + (r.lo ? num(*r.lo) : "") + "," + (r.hi ? num(*r.hi) : "") + "," + r.verdict + "\n";
  }
  return s;
}

nlohmann::json diff_json(const diff_result& d) {
  nlohmann::json j;
  j["threshold"] = d.threshold;
  j["resamples"] = d.resamples;
  j["base_runs"] = d.base_runs;
  j["new_runs"] = d.new_runs;
  j["machine_shift"] = d.machine_shift ? nlohmann::json(*d.machine_shift) : nlohmann::json(nullptr);
  j["basis"] = d.basis;
  j["ops"] = nlohmann::json::array();
  auto side = [](const std::optional<side_stats>& x) -> nlohmann::json {
    if (!x) return nullptr;
    return {{"count", x->count}, {"mean_ms", x->mean}, {"p50_ms", x->p50}, {"p90_ms", x->p90}};
  };
  auto finite = [](double v) -> nlohmann::json {
    if (!std::isfinite(v)) return nullptr;
    return v;
  };
  for (const auto& o : d.ops) {
    nlohmann::json e;
    e["name"] = o.name;
    e["verdict"] = o.verdict;
    e["base"] = side(o.base);
    e["new"] = side(o.next);
    if (o.base && o.next) {
      e["change"] = finite(o.change);
      e["mean_change"] = finite(o.mean_change);
      e["ci95"] = {finite(o.lo), finite(o.hi)};
      e["own_change"] = finite(o.own_change);
      e["judged_ci"] = {finite(o.own_lo), finite(o.own_hi)};
      if (std::isinf(o.change)) e["from_zero"] = true;  // base p50 0: no relative change
    } else {
      e["change"] = nullptr;
      e["mean_change"] = nullptr;
      e["ci95"] = nullptr;
      e["own_change"] = nullptr;
      e["judged_ci"] = nullptr;
    }
    j["ops"].push_back(std::move(e));
  }
  j["run"] = nlohmann::json::array();
  for (const auto& r : d.run) {
    nlohmann::json e;
    e["name"] = r.name;
    e["unit"] = r.unit;
    e["base"] = finite(r.base);
    e["new"] = finite(r.next);
    e["change"] = finite(r.change);
    e["change_kind"] = is_share(r) || r.name == "out_of_order" ? "difference" : "relative";
    if (r.lo && r.hi) {
      e["ci95"] = {finite(*r.lo), finite(*r.hi)};
    } else {
      e["ci95"] = nullptr;
    }
    e["verdict"] = r.verdict;
    j["run"].push_back(std::move(e));
  }
  return j;
}

namespace {

// The directories of one side: one run, or repeated runs (each directory a whole run). "auto":
// repeated when there are several and every one, read alone, gets the same label from its
// sidecars (the same host, and rank) — one run never holds the same host and rank twice.
std::vector<run_digest> digest_side(const input_args& in, const std::string& runs,
                                    const char* side) {
  bool repeats = runs == "repeats";
  std::vector<trace_dir> scanned;  // auto: each directory's scan, read again only as one run
  if (runs == "auto" && in.dirs.size() >= 2) {
    std::string first;
    repeats = true;
    for (std::size_t k = 0; k < in.dirs.size() && repeats; ++k) {
      scanned.push_back(scan_trace_dirs({in.dirs[k]}, in.prefix));
      const trace_dir& d = scanned.back();
      const bool named = !d.sources.empty() && !d.sources[0].host.empty();
      const std::string label = named ? d.sources[0].label : std::string();
      if (!named || (k > 0 && label != first)) repeats = false;
      if (k == 0) first = label;
    }
  }
  std::vector<run_digest> out;
  if (!repeats || in.dirs.size() < 2) {
    out.push_back(digest_run(in));
  } else {
    for (std::size_t k = 0; k < in.dirs.size(); ++k) {
      input_args one = in;
      one.dirs = {in.dirs[k]};
      if (k >= scanned.size()) {
        out.push_back(digest_run(one));
        continue;
      }
      run r(one, std::move(scanned[k]));  // (repeats: each its own run, scanned once)
      run_reading what;
      what.digest = true;
      r.read(what);
      out.push_back(r.digest());
    }
  }
  for (const auto& d : out) {
    if (d.ops.empty() && !d.has_batches())
      warning(std::string("diff: ") + side + " holds no records");
  }
  return out;
}

}  // namespace

void run_diff(const diff_args& a) {
  if (!(a.opt.threshold >= 0 && a.opt.threshold < 10)) {
    throw tool_error(exit_usage, "diff: --threshold must be a fraction in [0, 10) (0.1 = 10 %)");
  }
  if (a.opt.resamples < 100 || a.opt.resamples > 100000) {
    throw tool_error(exit_usage, "diff: --resamples must be in [100, 100000]");
  }
  if (!(a.opt.allowance >= 0 && a.opt.allowance < 10)) {
    throw tool_error(exit_usage, "diff: --allowance must be a fraction in [0, 10)");
  }
  const std::vector<run_digest> base = digest_side(a.base, a.runs, "BASE");
  const std::vector<run_digest> next = digest_side(a.next, a.runs, "NEW");
  const diff_result d = diff_repeated(base, next, a.opt);
  output_file out(a.output);
  if (a.json) {
    out.write(dump_json(diff_json(d), 2));
    out.write("\n");
  } else if (a.csv) {
    out.write(diff_csv(d));
  } else {
    out.write(diff_text(d));
  }
  out.commit();
}

}  // namespace lotus_tool
