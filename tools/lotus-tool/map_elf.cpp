// lotus — ELF function tables for stripped objects
// SPDX-License-Identifier: MIT
#include "map_elf.hpp"

#include <cxxabi.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>

#include "map_process.hpp"

namespace lotus_tool {

namespace {

template <class T>
T get(const std::vector<char>& b, std::size_t off) {
  T v{};
  if (off + sizeof(T) <= b.size()) std::memcpy(&v, b.data() + off, sizeof(T));
  return v;
}

struct section {
  std::string name;
  std::uint32_t type = 0;
  std::uint64_t addr = 0, offset = 0, size = 0;
  std::uint32_t link = 0;
};

bool read_at(std::ifstream& f, std::uint64_t off, std::uint64_t size, std::vector<char>& out) {
  if (size > (1ull << 30)) return false;
  out.resize(static_cast<std::size_t>(size));
  f.clear();
  f.seekg(static_cast<std::streamoff>(off));
  f.read(out.data(), static_cast<std::streamsize>(size));
  return static_cast<std::uint64_t>(f.gcount()) == size;
}

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
void elf_functions::load_symbols(const std::string& path) {
  static char* debuginfo_path = nullptr;
  Dwfl_Callbacks cb{};
  cb.find_elf = dwfl_build_id_find_elf;
  cb.find_debuginfo = dwfl_standard_find_debuginfo;
  cb.section_address = dwfl_offline_section_address;
  cb.debuginfo_path = &debuginfo_path;
  Dwfl* dwfl = dwfl_begin(&cb);
  if (dwfl == nullptr) return;
  dwfl_report_begin(dwfl);
  Dwfl_Module* mod = dwfl_report_offline(dwfl, "", path.c_str(), -1);
  dwfl_report_end(dwfl, nullptr, nullptr);
  const int n = mod != nullptr ? dwfl_module_getsymtab(mod) : -1;
  for (int i = 1; i < n; ++i) {  // 0: the null symbol
    GElf_Sym s{};
    GElf_Addr addr = 0;
    const char* name = dwfl_module_getsym_info(mod, i, &s, &addr, nullptr, nullptr, nullptr);
    // st_value: the object's own virtual address (a debug file has the same layout).
    if (name == nullptr || GELF_ST_TYPE(s.st_info) != STT_FUNC || s.st_value == 0) continue;
    syms_.push_back(sym{s.st_value, s.st_size, demangle(name)});
  }
  dwfl_end(dwfl);
}

bool elf_functions::load(const std::string& path) {
  starts_.clear();
  ends_.clear();
  syms_.clear();
  std::ifstream f(path, std::ios::binary);
  std::vector<char> eh;
  if (!f || !read_at(f, 0, 64, eh)) return false;
  if (std::memcmp(eh.data(),
                  "\x7f"
                  "ELF",
                  4) != 0 ||
      eh[4] != 2 || eh[5] != 1)
    return false;
  const auto shoff = get<std::uint64_t>(eh, 0x28);
  const auto shentsize = get<std::uint16_t>(eh, 0x3a);
  const auto shnum = get<std::uint16_t>(eh, 0x3c);
  const auto shstrndx = get<std::uint16_t>(eh, 0x3e);
  if (shentsize < 64 || shnum == 0 || shstrndx >= shnum) return false;
  std::vector<char> shdrs;
  if (!read_at(f, shoff, std::uint64_t{shentsize} * shnum, shdrs)) return false;
  std::vector<section> secs(shnum);
  for (std::size_t i = 0; i < shnum; ++i) {
    const std::size_t b = i * shentsize;
    secs[i].name = std::to_string(get<std::uint32_t>(shdrs, b));  // resolved below
    secs[i].type = get<std::uint32_t>(shdrs, b + 4);
    secs[i].addr = get<std::uint64_t>(shdrs, b + 16);
    secs[i].offset = get<std::uint64_t>(shdrs, b + 24);
    secs[i].size = get<std::uint64_t>(shdrs, b + 32);
    secs[i].link = get<std::uint32_t>(shdrs, b + 40);
  }
  std::vector<char> shstr;
  if (!read_at(f, secs[shstrndx].offset, secs[shstrndx].size, shstr)) return false;
  for (auto& s : secs) {
    const auto off = static_cast<std::size_t>(std::stoul(s.name));
    s.name = off < shstr.size() ? std::string(shstr.data() + off) : std::string();
  }
  const section* eh_frame = nullptr;
  for (const auto& s : secs)
    if (s.name == ".eh_frame") eh_frame = &s;
  std::vector<char> frames;
  if (eh_frame != nullptr && !read_at(f, eh_frame->offset, eh_frame->size, frames)) frames.clear();
  for (const auto& s : secs) {
    if (s.name == ".eh_frame_hdr") {
      std::vector<char> h;
      if (!read_at(f, s.offset, s.size, h) || h.size() < 12 || h[0] != 1) continue;
      const auto ptr_enc = static_cast<unsigned char>(h[1]);
      const auto cnt_enc = static_cast<unsigned char>(h[2]);
      const auto tab_enc = static_cast<unsigned char>(h[3]);
      auto width = [](unsigned char enc) -> std::size_t {
        switch (enc & 0x0f) {
          case 0x03:
          case 0x0b:
            return 4;
          case 0x04:
          case 0x0c:
            return 8;
          default:
            return 0;
        }
      };
      const std::size_t pw = width(ptr_enc), cw = width(cnt_enc);
      if (pw == 0 || cw == 0 || tab_enc != 0x3b) continue;  // datarel|sdata4, what ld writes
      std::size_t p = 4 + pw;
      const std::uint64_t count = cw == 4 ? get<std::uint32_t>(h, p) : get<std::uint64_t>(h, p);
      p += cw;
      for (std::uint64_t i = 0; i < count && p + 8 <= h.size(); ++i, p += 8) {
        const auto loc = get<std::int32_t>(h, p);
        const auto fde = get<std::int32_t>(h, p + 4);
        const auto start = static_cast<std::uint64_t>(static_cast<std::int64_t>(s.addr) + loc);
        // pc_range of the FDE (pcrel|sdata4 pointers, what GCC and ld emit on x86-64): lets
        // code without unwind info (hand-written SIMD) stay unnamed instead of being charged to
        // the function before it.
        std::uint64_t end = 0;
        if (eh_frame != nullptr && !frames.empty()) {
          const auto fde_addr = static_cast<std::uint64_t>(static_cast<std::int64_t>(s.addr) + fde);
          if (fde_addr >= eh_frame->addr) {
            const std::uint64_t off = fde_addr - eh_frame->addr + 12;
            if (off + 4 <= frames.size())
              end = start + get<std::uint32_t>(frames, static_cast<std::size_t>(off));
          }
        }
        starts_.push_back(start);
        ends_.push_back(end);
      }
    }
  }
  load_symbols(path);
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

void symbolize_addresses_like(function_profile& p, const std::vector<function_cost>& known) {
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
    const bool bare =
        r.function.size() > 2 && r.function.size() <= 18 && r.function.compare(0, 2, "0x") == 0 &&
        r.function.find_first_not_of("0123456789abcdefABCDEF", 2) == std::string::npos;
    if (!bare) continue;
    const auto e = entries.find(function_identity("", r.module));
    if (e == entries.end()) continue;
    const std::string path = find_library(r.module);
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
  symbolize_addresses(p, {});
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
  for (auto& r : p.rows) {
    const bool bare =
        r.function.size() > 2 && r.function.size() <= 18 && r.function.compare(0, 2, "0x") == 0 &&
        r.function.find_first_not_of("0123456789abcdefABCDEF", 2) == std::string::npos;
    if (bare) {
      const auto mp = module_paths.find(r.module);
      const std::string path = mp != module_paths.end() ? mp->second : find_library(r.module);
      if (!path.empty()) {
        auto c = cache.find(path);
        if (c == cache.end()) {
          c = cache.emplace(path, elf_functions{}).first;
          c->second.load(path);
        }
        const std::string n = c->second.name_for(std::stoull(r.function, nullptr, 16));
        if (!n.empty()) r.function = n;
      }
    }
    const auto key = std::make_pair(r.function, r.module);
    const auto it = index.find(key);
    if (it == index.end()) {
      index.emplace(key, out.size());
      out.push_back(r);
    } else {
      out[it->second].self += r.self;
      out[it->second].inclusive += r.inclusive;
      out[it->second].samples += r.samples;
    }
  }
  p.rows = std::move(out);
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
