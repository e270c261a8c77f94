// lotus — compile-time configuration: LOTUS_DISABLE and tunable defaults
// SPDX-License-Identifier: MIT
#pragma once

// LOTUS_DISABLE (presence-based, value ignored) compiles every LOTUS_* macro out and turns the
// public functions into no-ops. Define it for the whole program (CMake option LOTUS_DISABLE).
//
// The public API lives in an inline namespace whose name depends on LOTUS_DISABLE, so enabled and
// disabled translation units can be linked into one program without ODR violations.
//
// This is the one place that reads LOTUS_DISABLE: it names the ABI and sets LOTUS_DETAIL_ENABLED,
// by which lotus/detail/hooks.hpp picks the recording or the no-op implementation of what the
// public headers call (each public header is written once).
#ifdef LOTUS_DISABLE
#  define LOTUS_DETAIL_ABI v0_disabled
#  define LOTUS_DETAIL_ENABLED 0
#elif defined(LOTUS_TEST_HOOKS)  // lotus's own tests: a scripted clock and thread ids
#  define LOTUS_DETAIL_ABI v0_test_hooks
#  define LOTUS_DETAIL_ENABLED 1
#else
#  define LOTUS_DETAIL_ABI v0
#  define LOTUS_DETAIL_ENABLED 1
#endif

/// Default per-thread ring capacity in events (32 bytes each); LOTUS_RING_CAPACITY overrides.
#ifndef LOTUS_DEFAULT_RING_CAPACITY
#  define LOTUS_DEFAULT_RING_CAPACITY 32768
#endif

/// Default writer flush interval in milliseconds; LOTUS_FLUSH_INTERVAL_MS overrides.
#ifndef LOTUS_DEFAULT_FLUSH_INTERVAL_MS
#  define LOTUS_DEFAULT_FLUSH_INTERVAL_MS 100
#endif

/// Internal assertion, overridable (nlohmann JSON_ASSERT style).
#ifndef LOTUS_ASSERT
#  include <cassert>  // assert
#  define LOTUS_ASSERT(x) assert(x)
#endif
