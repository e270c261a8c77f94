// lotus — a fixed-size text builder for paths and sidecar lines (no allocation) (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>      // size_t
#include <cstdint>      // uint64_t
#include <cstring>      // memcpy, strlen
#include <string_view>  // string_view
#include <type_traits>  // enable_if_t, is_same_v, remove_reference_t

#include "lotus/config.hpp"
#include "lotus/detail/platform.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// The length of what snprintf wrote into a buffer of `size` bytes, from its return value `n`.
inline std::size_t printed(int n, std::size_t size) noexcept {
  if (n <= 0) return 0;
  return static_cast<std::size_t>(n) < size ? static_cast<std::size_t>(n) : size - 1;
}

/// Text of at most 4 KiB plus room for a file name: as long as a Linux path may be. Appending past
/// the end sets `overflow` (the caller reports ENAMETOOLONG) instead of allocating. The cold code
/// builds its paths and lines with this, not with std::string concatenation, which would cost
/// every translation unit that records a good part of a second to compile.
class text {
 public:
  text() noexcept { buf_[0] = '\0'; }
  text(const text&) = default;
  text& operator=(const text&) = default;

  LOTUS_DETAIL_NOINLINE text& add(const char* s, std::size_t n) noexcept {
    if (n > sizeof buf_ - 1 - size_) {
      n = sizeof buf_ - 1 - size_;
      overflow = true;
    }
    if (n == 0) return *this;  // `s` may be null then (an empty string_view's data())
    std::memcpy(buf_ + size_, s, n);
    size_ += n;
    buf_[size_] = '\0';
    return *this;
  }
  text& add(const char* s) noexcept { return add(s, std::strlen(s)); }
  text& add(std::string_view s) noexcept { return add(s.data(), s.size()); }
  text& add(const text& t) noexcept { return add(t.buf_, t.size_); }
  LOTUS_DETAIL_NOINLINE text& add(std::uint64_t v) noexcept {
    char digits[20];
    std::size_t n = 0;
    do {
      digits[sizeof digits - 1 - n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    return add(digits + sizeof digits - n, n);
  }
  text& add(char c) noexcept { return add(&c, 1); }
  /// A value for a one-line `key value` record (the sidecar): control bytes (C0, DEL) become
  /// '_', so a value can never start a line, or a key, of its own.
  LOTUS_DETAIL_NOINLINE text& add_value(const char* s, std::size_t n) noexcept {
    const std::size_t from = size_;
    add(s, n);
    for (std::size_t i = from; i < size_; ++i) {
      const auto c = static_cast<unsigned char>(buf_[i]);
      if (c < 0x20 || c == 0x7f) buf_[i] = '_';
    }
    return *this;
  }
  text& add_value(const char* s) noexcept { return add_value(s, std::strlen(s)); }
  text& add_value(const text& t) noexcept { return add_value(t.buf_, t.size_); }

  void clear() noexcept {
    size_ = 0;
    buf_[0] = '\0';
    overflow = false;
  }
  void resize(std::size_t n) noexcept {
    if (n < size_) {
      size_ = n;
      buf_[n] = '\0';
    }
  }
  const char* c_str() const noexcept { return buf_; }
  std::size_t size() const noexcept { return size_; }
  /// The most bytes a text holds.
  static constexpr std::size_t capacity() noexcept { return max_size - 1; }
  /// `n` more bytes fit without cutting.
  bool fits(std::size_t n) const noexcept { return n <= capacity() - size_; }
  bool empty() const noexcept { return size_ == 0; }

  bool overflow = false;

 private:
  static constexpr std::size_t max_size = 4352;
  char buf_[max_size];
  std::size_t size_ = 0;
};

/// Something that takes texts (a lambda), passed by reference without a template: a function
/// that takes one is compiled once, whatever each caller passes. Valid while the callable lives.
class text_sink {
 public:
  template <class F, class = std::enable_if_t<
                         !std::is_same_v<std::remove_cv_t<std::remove_reference_t<F>>, text_sink>>>
  text_sink(F&& f) noexcept  // NOLINT(google-explicit-constructor): made where it is passed
      : ctx_(static_cast<void*>(&f)),
        fn_([](void* c, const text& t) { (*static_cast<std::remove_reference_t<F>*>(c))(t); }) {}
  void operator()(const text& t) const noexcept { fn_(ctx_, t); }

 private:
  void* ctx_;
  void (*fn_)(void*, const text&);
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
