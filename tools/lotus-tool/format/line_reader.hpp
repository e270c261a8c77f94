// lotus — lotus-tool format: streaming line reader, and a trace file's lines as records
// SPDX-License-Identifier: MIT
// Constant memory, read(2) in large chunks, newlines found 64 bytes at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "format/record.hpp"

namespace lotus_tool {

/// Reads a file line by line through a fixed buffer. Lines longer than `max_line` are reported
/// as one truncated line with `too_long` set (the rest of that line is skipped).
class line_reader {
 public:
  struct line {
    std::string_view text;     ///< without the trailing '\n'
    std::uint64_t number = 0;  ///< 1-based
    bool has_newline = true;   ///< false for a last line cut off before its '\n'
    bool too_long = false;
  };

  /// Longest line read whole: names of any length are valid (LOTUS_SCOPE_DYNAMIC), so this is
  /// only a memory bound. The buffer grows to it only for a line that needs it.
  static constexpr std::size_t k_default_max_line = std::size_t{16} << 20;
  static constexpr std::size_t k_default_chunk = 1 << 20;

  /// Opens `path` (never blocking: a FIFO or device is refused, not waited on) and reads it up
  /// to its size at open (a file still growing is read as it was then). Throws
  /// tool_error(exit_io) with the OS reason on failure.
  explicit line_reader(const std::string& path, std::size_t max_line = k_default_max_line);
  /// Reads from an in-memory buffer (tests, fuzzing), `chunk` bytes per refill.
  line_reader(std::string_view data, std::size_t max_line, std::size_t chunk = k_default_chunk);
  ~line_reader();
  line_reader(const line_reader&) = delete;
  line_reader& operator=(const line_reader&) = delete;

  /// Next line, or false at end of file. Throws tool_error(exit_io) on read errors.
  bool next(line& out);

  std::uint64_t bytes_read() const noexcept { return bytes_; }

 private:
  friend std::string read_whole_file(const std::string& path);
  bool fill();
  bool growing() const noexcept;  ///< the file is now longer than at open
  void size_buffer(std::uint64_t input_size);
  std::size_t find_newline() const noexcept;

  std::string path_;
  int fd_ = -1;
  std::string_view mem_;
  bool from_memory_ = false;
  std::vector<char> buf_;  ///< max_line + chunk + 1 bytes of data, then 64 bytes of padding
  std::size_t cap_ = 0;    ///< data capacity of buf_
  std::size_t chunk_;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
  bool eof_ = false;
  bool skipping_ = false;
  std::uint64_t lineno_ = 0;
  std::uint64_t bytes_ = 0;
  std::uint64_t limit_ = 0;  ///< bytes to read: the size at open
  std::size_t max_line_;
};

/// "a FIFO", "a character device", ... for a st_mode that is not a regular file.
const char* file_type_name(unsigned mode) noexcept;

/// The whole file (for small inputs such as --merge and --attribution documents). Throws
/// tool_error(exit_io) `path: cannot open: reason` or `path: read error`.
std::string read_whole_file(const std::string& path);

/// Validates one line as `check` does (format + batch index). Returns nullptr or a reason.
const char* validate_line(std::string_view text, bool has_newline, bool too_long, record& rec,
                          batch_ref& batch) noexcept;

/// Reads the file `path` line by line, each validated as `check` does: `fn(line, why, rec,
/// batch)`, `why` nullptr for a record (`rec` and `batch` filled) or the reason it is none.
/// False when the file has no line. `check` and every command's reading share it.
template <class F>
bool for_each_line(const std::string& path, F&& fn) {
  line_reader reader(path);
  line_reader::line ln;
  record rec;
  batch_ref batch;
  bool any = false;
  while (reader.next(ln)) {
    any = true;
    fn(ln, validate_line(ln.text, ln.has_newline, ln.too_long, rec, batch), rec, batch);
  }
  return any;
}

}  // namespace lotus_tool
