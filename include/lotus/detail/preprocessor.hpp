// lotus — preprocessor helpers (internal)
// SPDX-License-Identifier: MIT
#pragma once

#define LOTUS_DETAIL_CONCAT_IMPL(a, b) a##b
#define LOTUS_DETAIL_CONCAT(a, b) LOTUS_DETAIL_CONCAT_IMPL(a, b)
#ifdef __COUNTER__
#  define LOTUS_DETAIL_UNIQUE(prefix) LOTUS_DETAIL_CONCAT(prefix, __COUNTER__)
#else
#  define LOTUS_DETAIL_UNIQUE(prefix) LOTUS_DETAIL_CONCAT(prefix, __LINE__)
#endif
