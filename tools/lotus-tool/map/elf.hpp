// lotus — function names for unresolved addresses in stripped ELF objects (.eh_frame_hdr)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "map/profile.hpp"

struct Dwfl_Module;
struct Elf;

namespace lotus_tool {

/// Function boundaries of one ELF64 object: FUNC symbols read with elfutils (.symtab, a separate
/// debug file found by build-id or .gnu_debuglink, else .dynsym) and the start of every function
/// that has unwind info (.eh_frame_hdr's sorted table), which stripped libraries keep for their
/// static functions too.
class elf_functions {
 public:
  /// False when elfutils cannot read the file as an ELF object.
  bool load(const std::string& path);
  /// Symbol name covering `addr` (object virtual address), else "func@0x<start>" (VTune's name
  /// for functions without symbols), else "".
  std::string name_for(std::uint64_t addr) const;
  std::size_t starts() const { return starts_.size(); }
  /// For an address in code without symbol or unwind info (past the end of the function before
  /// it): where that stretch starts; 0 otherwise.
  std::uint64_t gap_start(std::uint64_t addr) const;
  /// Every FUNC symbol's (demangled) name, in address order.
  std::vector<std::string> function_names() const;

 private:
  struct sym {
    std::uint64_t start, size;
    std::string name;
  };
  void load_symbols(struct Dwfl_Module* mod);
  void load_unwind_bounds(struct Dwfl_Module* mod, struct Elf* elf);
  std::vector<std::uint64_t> starts_;
  std::vector<std::uint64_t> ends_;  ///< 0 when the FDE could not be read
  std::vector<sym> syms_;
};

/// Renames rows whose function is a bare address ("0x000000000002314d", as perf and Callgrind
/// print for stripped code) to the function containing it, merging rows that land on the same
/// function. `module_paths` maps a module basename to its file; libraries missing from it are
/// looked up with find_library.
void symbolize_addresses(function_profile& p,
                         const std::map<std::string, std::string>& module_paths);

/// A shared object's file from its basename in the system library directories, or "".
std::string find_library(const std::string& basename);

/// Like symbolize_addresses, but an address in code without symbol or unwind info takes the name
/// of the nearest function entry at or below it that `known` names (`func@0x<entry>` with the
/// same library, as Callgrind names the entries it saw called) within the same stretch, so a
/// profile and a mapping made by different collectors name it the same way.
/// `module_paths` (basename → file) is tried before find_library.
void symbolize_addresses_like(function_profile& p, const std::vector<function_cost>& known,
                              const std::map<std::string, std::string>& module_paths = {});

/// The functions an ELF object's DWARF (its own, or a separate debug file) shows inlined into
/// callers (DW_TAG_inlined_subroutine), by demangled name without parameters; empty without
/// debug info.
std::vector<std::string> inlined_functions(const std::string& path);

/// Basename → path of a program and the shared libraries it loads (from `ldd`; real paths, so
/// "libjpeg.so.62.3.0" is found as perf names it).
std::map<std::string, std::string> program_modules(const std::string& program);

}  // namespace lotus_tool
