// lotus — ELF function tables (symbols, debug files, unwind bounds) through elfutils
// SPDX-License-Identifier: MIT
#include "map/elf.hpp"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>

#include "util/process.hpp"

namespace lotus_tool {

namespace {

std::string demangle(const char* n) {
  if (std::strncmp(n, "_Z", 2) != 0) return n;
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(n, nullptr, nullptr, &status),
                                           std::free);
  return status == 0 && d ? std::string(d.get()) : std::string(n);
}

}  // namespace

// Function symbols through elfutils' libdwfl: the object's .symtab, else a separate debug file
// found by build-id or .gnu_debuglink (dwfl_standard_find_debuginfo: /usr/lib/debug, the
// object's directory and its .debug/), else .dynsym, as perf resolves them.
void elf_functions::load_symbols(Dwfl_Module* mod) {
  const int n = dwfl_module_getsymtab(mod);
  for (int i = 1; i < n; ++i) {  // 0: the null symbol
    GElf_Sym s{};
    GElf_Addr addr = 0;
    const char* name = dwfl_module_getsym_info(mod, i, &s, &addr, nullptr, nullptr, nullptr);
    // st_value: the object's own virtual address (a debug file has the same layout).
    if (name == nullptr || GELF_ST_TYPE(s.st_info) != STT_FUNC || s.st_value == 0) continue;
    syms_.push_back(sym{s.st_value, s.st_size, demangle(name)});
  }
}

// Function bounds from the unwind tables, for code without symbols (Debian's stripped
// libraries): libelf hands over .eh_frame_hdr's binary-search table (the start address of every
// FDE), libdw's CFI reader (dwarf_cfi_addrframe + dwarf_frame_info) the range each FDE covers, so
// code without unwind info (hand-written SIMD) stays unnamed instead of being charged to the
// function before it.
void elf_functions::load_unwind_bounds(Dwfl_Module* mod, Elf* elf) {
  std::size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0) return;
  Elf_Scn* hdr = nullptr;
  GElf_Shdr hdr_sh{};
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh{};
    if (gelf_getshdr(scn, &sh) == nullptr) continue;
    const char* name = elf_strptr(elf, shstrndx, sh.sh_name);
    if (name != nullptr && std::strcmp(name, ".eh_frame_hdr") == 0) {
      hdr = scn;
      hdr_sh = sh;
      break;
    }
  }
  // The CFI works in the object's own addresses (the table's), whatever the module's load bias.
  Dwarf_Addr cfi_bias = 0;
  Dwarf_CFI* cfi = dwfl_module_eh_cfi(mod, &cfi_bias);
  Elf_Data* data = hdr != nullptr ? elf_getdata(hdr, nullptr) : nullptr;
  if (data == nullptr || data->d_buf == nullptr || cfi == nullptr) return;
  const auto* h = static_cast<const unsigned char*>(data->d_buf);
  const std::size_t size = data->d_size;
  // Header: version 1, then the encodings of eh_frame_ptr, fde_count and the table; ld writes
  // udata4/sdata4 counts and a datarel|sdata4 table of (initial location, FDE address) pairs.
  if (size < 12 || h[0] != 1 || h[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4)) return;
  auto width = [](unsigned char enc) -> std::size_t {
    const unsigned format = enc & 0x0fu;
    if (format == DW_EH_PE_udata4 || format == DW_EH_PE_sdata4) return 4;
    if (format == DW_EH_PE_udata8 || format == DW_EH_PE_sdata8) return 8;
    return 0;
  };
  const std::size_t pw = width(h[1]), cw = width(h[2]);
  if (pw == 0 || (cw != 4 && cw != 8) || 4 + pw + cw > size) return;
  std::uint64_t count = 0;
  if (cw == 4) {
    std::uint32_t c = 0;
    std::memcpy(&c, h + 4 + pw, 4);
    count = c;
  } else {
    std::memcpy(&count, h + 4 + pw, 8);
  }
  std::size_t p = 4 + pw + cw;
  std::vector<std::uint64_t> starts;
  for (std::uint64_t i = 0; i < count && p + 8 <= size; ++i, p += 8) {
    std::int32_t loc = 0;
    std::memcpy(&loc, h + p, 4);
    starts.push_back(static_cast<std::uint64_t>(static_cast<std::int64_t>(hdr_sh.sh_addr) + loc));
  }
  std::sort(starts.begin(), starts.end());  // ld sorts it; each walk below stops at the next start
  for (std::size_t i = 0; i < starts.size(); ++i) {
    // A Dwarf_Frame is one row of the FDE's CFA table: walk the rows to where the FDE ends
    // (no frame there, a gap) or the next FDE begins (no gap).
    const std::uint64_t limit = i + 1 < starts.size() ? starts[i + 1] : UINT64_MAX;
    std::uint64_t at = starts[i];
    while (at < limit) {
      Dwarf_Frame* frame = nullptr;
      if (dwarf_cfi_addrframe(cfi, at, &frame) != 0 || frame == nullptr) break;
      Dwarf_Addr fstart = 0, fend = 0;
      bool signal = false;
      const int ok = dwarf_frame_info(frame, &fstart, &fend, &signal);
      std::free(frame);
      if (ok < 0 || fend <= at) break;
      at = fend;
    }
    starts_.push_back(starts[i]);
    // at == start: libdw could not read the FDE; 0 keeps the whole stretch to the next start.
    ends_.push_back(at == starts[i] ? 0 : std::min(at, limit));
  }
}

// Only regular files are opened: a path from a mapping or a profile is data, and a FIFO or a
// device there must not block or feed the reader.
static bool regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

namespace {

// One ELF file opened offline with elfutils (its separate debug file found by build-id or debug
// link); `mod` lives as long as `dwfl`. Null `mod` when the file is not a regular ELF file.
struct offline_module {
  std::unique_ptr<Dwfl, void (*)(Dwfl*)> dwfl{nullptr, dwfl_end};
  Dwfl_Module* mod = nullptr;
};

offline_module open_offline(const std::string& path) {
  offline_module m;
  if (!regular_file(path)) return m;
  static char* debuginfo_path = nullptr;
  static const Dwfl_Callbacks cb = [] {
    Dwfl_Callbacks c{};
    c.find_elf = dwfl_build_id_find_elf;
    c.find_debuginfo = dwfl_standard_find_debuginfo;
    c.section_address = dwfl_offline_section_address;
    c.debuginfo_path = &debuginfo_path;
    return c;
  }();
  m.dwfl.reset(dwfl_begin(&cb));
  if (m.dwfl == nullptr) return m;
  dwfl_report_begin(m.dwfl.get());
  m.mod = dwfl_report_offline(m.dwfl.get(), "", path.c_str(), -1);
  dwfl_report_end(m.dwfl.get(), nullptr, nullptr);
  return m;
}

}  // namespace

bool elf_functions::load(const std::string& path) {
  starts_.clear();
  ends_.clear();
  syms_.clear();
  const offline_module m = open_offline(path);
  Dwfl_Module* mod = m.mod;
  if (mod == nullptr) return false;
  GElf_Addr bias = 0;
  Elf* elf = dwfl_module_getelf(mod, &bias);
  if (elf == nullptr) return false;
  load_unwind_bounds(mod, elf);
  load_symbols(mod);
  std::vector<std::size_t> order(starts_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return starts_[a] < starts_[b]; });
  std::vector<std::uint64_t> st, en;
  for (auto i : order) {
    st.push_back(starts_[i]);
    en.push_back(ends_[i]);
  }
  starts_ = std::move(st);
  ends_ = std::move(en);
  std::sort(syms_.begin(), syms_.end(),
            [](const sym& a, const sym& b) { return a.start < b.start; });
  return true;
}

std::string elf_functions::name_for(std::uint64_t addr) const {
  auto it = std::upper_bound(syms_.begin(), syms_.end(), addr,
                             [](std::uint64_t a, const sym& s) { return a < s.start; });
  if (it != syms_.begin()) {
    const sym& s = *(it - 1);
    if (addr < s.start + std::max<std::uint64_t>(s.size, 1)) return s.name;
  }
  auto st = std::upper_bound(starts_.begin(), starts_.end(), addr);
  if (st == starts_.begin()) return {};
  const auto i = static_cast<std::size_t>(st - starts_.begin()) - 1;
  // Past the end of the last function with unwind info (hand-written assembly, such as
  // libjpeg-turbo's SIMD code, has none): the block that starts where that function ends. Maps
  // and profiles name an address the same way, so they still match.
  const std::uint64_t start = ends_[i] != 0 && addr >= ends_[i] ? ends_[i] : starts_[i];
  char buf[40];
  std::snprintf(buf, sizeof buf, "func@0x%llx", static_cast<unsigned long long>(start));
  return buf;
}

std::vector<std::string> elf_functions::function_names() const {
  std::vector<std::string> v;
  v.reserve(syms_.size());
  for (const auto& s : syms_) v.push_back(s.name);
  return v;
}

namespace {

// The name of the function an inlined-subroutine DIE stands for: its linkage name (through
// DW_AT_abstract_origin / DW_AT_specification), demangled, else its plain name.
std::string inlined_name(Dwarf_Die* die) {
  Dwarf_Attribute attr;
  const char* link = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
  if (link == nullptr)
    link = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
  if (link != nullptr) return strip_parameters(demangle(link));
  const char* name = dwarf_diename(die);
  return name != nullptr ? std::string(name) : std::string();
}

void collect_inlined(Dwarf_Die* die, std::vector<std::string>& out, int depth) {
  if (depth > 64) return;  // malformed or hostile nesting
  Dwarf_Die child;
  if (dwarf_child(die, &child) != 0) return;
  do {
    if (dwarf_tag(&child) == DW_TAG_inlined_subroutine) {
      std::string n = inlined_name(&child);
      if (!n.empty()) out.push_back(std::move(n));
    }
    collect_inlined(&child, out, depth + 1);
  } while (dwarf_siblingof(&child, &child) == 0);
}

}  // namespace

std::vector<std::string> inlined_functions(const std::string& path) {
  std::vector<std::string> out;
  const offline_module m = open_offline(path);
  Dwfl_Module* mod = m.mod;
  if (mod == nullptr) return out;
  Dwarf_Addr bias = 0;
  Dwarf* dw = dwfl_module_getdwarf(mod, &bias);
  if (dw == nullptr) return out;
  Dwarf_Off off = 0, next = 0;
  std::size_t header = 0;
  while (dwarf_nextcu(dw, off, &next, &header, nullptr, nullptr, nullptr) == 0) {
    Dwarf_Die cu;
    if (dwarf_offdie(dw, off + header, &cu) != nullptr) collect_inlined(&cu, out, 0);
    off = next;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::uint64_t elf_functions::gap_start(std::uint64_t addr) const {
  auto it = std::upper_bound(syms_.begin(), syms_.end(), addr,
                             [](std::uint64_t a, const sym& s) { return a < s.start; });
  if (it != syms_.begin()) {
    const sym& s = *(it - 1);
    if (addr < s.start + std::max<std::uint64_t>(s.size, 1)) return 0;
  }
  auto st = std::upper_bound(starts_.begin(), starts_.end(), addr);
  if (st == starts_.begin()) return 0;
  const auto i = static_cast<std::size_t>(st - starts_.begin()) - 1;
  return ends_[i] != 0 && addr >= ends_[i] ? ends_[i] : 0;
}

void symbolize_addresses_like(function_profile& p, const std::vector<function_cost>& known,
                              const std::map<std::string, std::string>& module_paths) {
  // library (identity, without version) → entries named func@0x<entry>
  std::map<std::string, std::vector<std::uint64_t>> entries;
  for (const auto& k : known) {
    if (k.function.rfind("func@0x", 0) != 0) continue;
    const std::string lib = function_identity("", k.module);
    entries[lib].push_back(std::stoull(k.function.substr(7), nullptr, 16));
  }
  for (auto& v : entries) std::sort(v.second.begin(), v.second.end());
  std::map<std::string, elf_functions> cache;
  for (auto& r : p.rows) {
    const bool bare = is_bare_address(r.function);
    if (!bare) continue;
    const auto e = entries.find(function_identity("", r.module));
    if (e == entries.end()) continue;
    const auto mp = module_paths.find(r.module);
    const std::string path = mp != module_paths.end() ? mp->second : find_library(r.module);
    if (path.empty()) continue;
    auto c = cache.find(path);
    if (c == cache.end()) {
      c = cache.emplace(path, elf_functions{}).first;
      c->second.load(path);
    }
    const std::uint64_t addr = std::stoull(r.function, nullptr, 16);
    const std::uint64_t gap = c->second.gap_start(addr);
    if (gap == 0) continue;
    auto it = std::upper_bound(e->second.begin(), e->second.end(), addr);
    if (it == e->second.begin() || *(it - 1) < gap) continue;
    char buf[40];
    std::snprintf(buf, sizeof buf, "func@0x%llx", static_cast<unsigned long long>(*(it - 1)));
    r.function = buf;
  }
  symbolize_addresses(p, module_paths);
}

std::string find_library(const std::string& basename) {
  if (!is_shared_object(basename) || basename.find('/') != std::string::npos) return {};
  static const char* const dirs[] = {"/lib/x86_64-linux-gnu",
                                     "/usr/lib/x86_64-linux-gnu",
                                     "/lib64",
                                     "/usr/lib64",
                                     "/lib",
                                     "/usr/lib",
                                     "/usr/local/lib"};
  for (const char* d : dirs) {
    const std::string p = std::string(d) + "/" + basename;
    if (::access(p.c_str(), R_OK) == 0) return p;
  }
  return {};
}

void symbolize_addresses(function_profile& p,
                         const std::map<std::string, std::string>& module_paths) {
  std::map<std::string, elf_functions> cache;
  std::vector<function_cost> out;
  std::map<std::pair<std::string, std::string>, std::size_t> index;
  std::vector<function_cost> extra;  // split off by address; merged after the rows
  auto merge = [&](function_cost& r) {
    const auto key = std::make_pair(r.function, r.module);
    const auto it = index.find(key);
    if (it == index.end()) {
      index.emplace(key, out.size());
      out.push_back(std::move(r));
    } else {
      out[it->second].self += r.self;
      out[it->second].inclusive += r.inclusive;
      out[it->second].samples += r.samples;
      for (const auto& [name, v] : r.metrics) out[it->second].metrics[name] += v;
    }
  };
  for (auto& r : p.rows) {
    const bool bare = is_bare_address(r.function);
    if (bare) {
      const auto mp = module_paths.find(r.module);
      const std::string path = mp != module_paths.end() ? mp->second : find_library(r.module);
      if (!path.empty()) {
        auto c = cache.find(path);
        if (c == cache.end()) {
          c = cache.emplace(path, elf_functions{}).first;
          c->second.load(path);
        }
        const auto at = p.at.find(function_key(r));
        const std::string n = c->second.name_for(std::stoull(r.function, nullptr, 16));
        if (!n.empty()) r.function = n;
        // Cost Callgrind charged to this function at addresses of other code (assembly without
        // symbols that it called): a row of its own, named as a sample there would be.
        std::map<std::string, std::pair<double, double>> moved;
        if (at != p.at.end())
          for (const auto& [where, cost] : at->second) {
            const std::string m = c->second.name_for(where);
            if (m.empty() || m == r.function) continue;
            moved[m].first += cost.first;
            moved[m].second += cost.second;
          }
        for (const auto& [name, cost] : moved) {
          function_cost x;
          x.function = name;
          x.module = r.module;
          x.self = x.inclusive = cost.first;
          r.self -= cost.first;
          r.inclusive -= cost.first;
          const auto est = r.metrics.find(cycle_estimate_metric);
          if (est != r.metrics.end()) {
            x.metrics[cycle_estimate_metric] = cost.second;
            est->second -= cost.second;
          }
          extra.push_back(std::move(x));
        }
      }
    }
    merge(r);
  }
  for (auto& x : extra) merge(x);
  p.rows = std::move(out);
  p.at.clear();
}

std::map<std::string, std::string> program_modules(const std::string& program) {
  std::map<std::string, std::string> m;
  auto add = [&](const std::string& path) {
    char real[PATH_MAX];
    const std::string p = ::realpath(path.c_str(), real) != nullptr ? std::string(real) : path;
    m.emplace(module_basename(p), p);
    m.emplace(module_basename(path), p);
  };
  add(program);
  const std::string ldd = find_executable("ldd");
  if (ldd.empty()) return m;
  char tmpl[] = "/tmp/lotus-ldd-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  if (fd < 0) return m;
  ::close(fd);
  run_spec s;
  s.argv = {ldd, program};
  s.stdout_path = tmpl;
  s.stderr_path = "/dev/null";
  s.timeout_s = 30;
  run_process(s);
  std::ifstream in(tmpl);
  std::string line;
  while (std::getline(in, line)) {
    // "\tlibjpeg.so.62 => /lib/x86_64-linux-gnu/libjpeg.so.62 (0x...)" or "\t/lib64/ld-linux...
    // (0x...)"
    auto arrow = line.find("=> ");
    std::string rest = arrow == std::string::npos ? trim_copy(line) : line.substr(arrow + 3);
    const auto paren = rest.find(" (");
    if (paren != std::string::npos) rest.resize(paren);
    rest = trim_copy(rest);
    if (!rest.empty() && rest[0] == '/') add(rest);
  }
  ::unlink(tmpl);
  return m;
}

}  // namespace lotus_tool
