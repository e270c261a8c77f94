// lotus tests — whether this test, and the lotus code it runs, has a sanitizer runtime
// SPDX-License-Identifier: MIT
//
// Built with the same flags, so the answer holds for both: shadow memory and address-space
// reservations then change RSS figures and what RLIMIT_AS allows.
#pragma once

#if defined(__has_feature)
#  if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#    define LOTUS_TEST_SANITIZED 1
#  endif
#  if __has_feature(thread_sanitizer)
#    define LOTUS_TEST_TSAN 1
#  endif
#endif

namespace lotus_test {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || defined(LOTUS_TEST_SANITIZED)
inline constexpr bool k_sanitized = true;
#else
inline constexpr bool k_sanitized = false;
#endif

// ThreadSanitizer cannot follow a multi-threaded fork whose child starts threads ("starting new
// threads after multi-threaded fork is not supported"); the gcc, clang and asan variants run the
// fork tests.
#if defined(__SANITIZE_THREAD__) || defined(LOTUS_TEST_TSAN)
inline constexpr bool k_under_tsan = true;
#else
inline constexpr bool k_under_tsan = false;
#endif
}  // namespace lotus_test
