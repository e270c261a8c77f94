// lotus — lotus-tool: every DataLoader iterator's start, grouped by where its loader was made
// SPDX-License-Identifier: MIT
#include "trace/startup_sites.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "util/format.hpp"
#include "util/output.hpp"

namespace lotus_tool {

namespace {

int site_hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string unescape_site(const std::string& field) {
  if (field.empty() || field == "-" || field.size() > k_max_site_field) return {};
  std::string out;
  out.reserve(field.size());
  for (std::size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '%' && i + 2 < field.size() && site_hex_value(field[i + 1]) >= 0 &&
        site_hex_value(field[i + 2]) >= 0) {
      out += static_cast<char>(site_hex_value(field[i + 1]) * 16 + site_hex_value(field[i + 2]));
      i += 2;
    } else {
      out += field[i];
    }
  }
  return out;
}

void read_startup_sites(std::istringstream& ls, startup_meta& m) {
  std::string loader, site, iter_site;
  if (!(ls >> loader >> site >> iter_site)) return;  // an older lotus: none
  m.loader = -1;
  if (!loader.empty() && loader.size() <= 18 &&
      std::all_of(loader.begin(), loader.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    m.loader = static_cast<std::int64_t>(std::stoll(loader));
  }
  m.site = unescape_site(site);
  m.iter_site = unescape_site(iter_site);
}

std::vector<startup_site> startup_sites(const startup_analysis& a, double main_ms) {
  std::vector<startup_site> out;
  std::map<std::string, std::size_t> index;
  struct site_work {
    // Per main process (pid, host): its loaders here, and whether it started here before.
    std::map<std::pair<std::uint64_t, std::string>, std::set<std::int64_t>> loaders;
    std::map<std::string, std::uint64_t> iter_sites;
  };
  std::vector<site_work> work;
  // The iterators are in the order they began: a process's first start at a site comes first.
  for (const startup_iteration& it : a.iterations) {
    auto [pos, fresh] = index.try_emplace(it.site, out.size());
    if (fresh) {
      out.emplace_back();
      out.back().site = it.site;
      out.back().method = it.method;
      work.emplace_back();
    }
    startup_site& s = out[pos->second];
    site_work& w = work[pos->second];
    const double t = it.first_ns != 0 ? it.ttfb_ms : it.init_ms;
    const auto proc = std::make_pair(it.pid, it.host);
    const bool first_here = w.loaders.find(proc) == w.loaders.end();
    std::set<std::int64_t>& mine = w.loaders[proc];
    if (it.loader >= 0) mine.insert(it.loader);
    ++s.starts;
    s.workers = std::max<std::uint64_t>(s.workers, it.workers);
    s.persistent = s.persistent || it.persistent;
    s.start_ms += t;
    s.init_ms += it.init_ms;
    s.imports_ms += it.imports_ms;
    s.pickle_ms += it.pickle_ms;
    if (!first_here) s.repeat_ms += std::max(0.0, t - it.first_batch_ms);
    if (!it.iter_site.empty() && it.iter_site != it.site) ++w.iter_sites[it.iter_site];
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    startup_site& s = out[i];
    const site_work& w = work[i];
    s.processes = w.loaders.size();
    for (const auto& p : w.loaders) {
      s.loaders += p.second.size();
      s.most_loaders = std::max<std::uint64_t>(s.most_loaders, p.second.size());
    }
    std::uint64_t best = 0;
    for (const auto& x : w.iter_sites) {
      if (x.second > best) {
        best = x.second;
        s.iter_site = x.first;
      }
    }
    s.mean_start_ms = s.starts != 0 ? s.start_ms / static_cast<double>(s.starts) : 0.0;
    s.share = main_ms > 0 ? std::min(1.0, s.start_ms / main_ms) : 0.0;
    s.repeat_share = main_ms > 0 ? std::min(1.0, s.repeat_ms / main_ms) : 0.0;
  }
  std::stable_sort(out.begin(), out.end(), [](const startup_site& x, const startup_site& y) {
    return x.start_ms > y.start_ms;
  });
  return out;
}

site_parts split_site(const std::string& site) {
  site_parts p;
  const std::size_t fn = site.rfind(':');
  const std::size_t ln =
      fn == std::string::npos || fn == 0 ? std::string::npos : site.rfind(':', fn - 1);
  const bool digits = ln != std::string::npos && fn > ln + 1 && fn - ln - 1 <= 9 &&
                      std::all_of(site.begin() + static_cast<std::ptrdiff_t>(ln) + 1,
                                  site.begin() + static_cast<std::ptrdiff_t>(fn),
                                  [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) {
    p.file = site;
    return p;
  }
  p.file = site.substr(0, ln);
  p.line = std::stoull(site.substr(ln + 1, fn - ln - 1));
  p.function = site.substr(fn + 1);
  return p;
}

nlohmann::json startup_sites_json(const std::vector<startup_site>& sites) {
  nlohmann::json a = nlohmann::json::array();
  for (const startup_site& s : sites) {
    nlohmann::json o = {
        {"site", s.site.empty() ? nlohmann::json() : nlohmann::json(s.site)},
        {"iter_site", s.iter_site.empty() ? nlohmann::json() : nlohmann::json(s.iter_site)},
        {"starts", s.starts},
        {"loaders", s.loaders},
        {"processes", s.processes},
        {"most_loaders", s.most_loaders},
        {"rebuilt", s.rebuilt()},
        {"workers", s.workers},
        {"method", s.method},
        {"persistent", s.persistent},
        {"start_ms", s.start_ms},
        {"init_ms", s.init_ms},
        {"mean_start_ms", s.mean_start_ms},
        {"repeat_ms", s.repeat_ms},
        {"share", s.share},
        {"repeat_share", s.repeat_share}};
    if (!s.site.empty()) {
      const site_parts p = split_site(s.site);
      o["file"] = p.file;
      o["line"] = p.line;
      o["function"] = p.function;
    }
    a.push_back(std::move(o));
  }
  return a;
}

std::string startup_sites_text(const std::vector<startup_site>& sites, double main_ms) {
  const bool known = std::any_of(sites.begin(), sites.end(),
                                 [](const startup_site& s) { return !s.site.empty(); });
  if (!known) return {};
  std::string out = "\tby the loader's creation site (starts, their time";
  out +=
      main_ms > 0 ? " and share of the main-process time " + format_ms(main_ms) + "):\n" : "):\n";
  std::size_t shown = 0;
  for (const startup_site& s : sites) {
    if (shown == 8) {
      out += "\t\t... and " + std::to_string(sites.size() - shown) + " more site(s)\n";
      break;
    }
    ++shown;
    out += "\t\t" + (s.site.empty() ? std::string("(not recorded)") : printable(s.site)) + ": " +
           std::to_string(s.starts) + " start" + (s.starts == 1 ? "" : "s");
    if (s.loaders != 0) {
      out += " of " + std::to_string(s.loaders) + " loader" + (s.loaders == 1 ? "" : "s");
    }
    out += ", " + format_ms(s.start_ms);
    if (main_ms > 0) out += " (" + pct(s.share) + ")";
    if (!s.iter_site.empty()) out += "; iter() at " + printable(s.iter_site);
    if (s.rebuilt()) out += "; rebuilt: made " + std::to_string(s.most_loaders) + " times";
    out += "\n";
  }
  return out;
}

}  // namespace lotus_tool
