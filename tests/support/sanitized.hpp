// lotus tests — whether this test (and the lotus code it runs, built with the same flags) has a
// sanitizer runtime: its shadow memory and address-space reservations change RSS and RLIMIT_AS
// SPDX-License-Identifier: MIT
#pragma once

#if defined(__has_feature)
#  if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#    define LOTUS_TEST_SANITIZED 1
#  endif
#endif

namespace lotus_test {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || defined(LOTUS_TEST_SANITIZED)
inline constexpr bool k_sanitized = true;
#else
inline constexpr bool k_sanitized = false;
#endif
}  // namespace lotus_test
