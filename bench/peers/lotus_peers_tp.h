// lotus — LTTng-UST tracepoint provider for the peers benchmark
// SPDX-License-Identifier: MIT
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER lotus_peers

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./lotus_peers_tp.h"

#if !defined(LOTUS_PEERS_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#  define LOTUS_PEERS_TP_H

#  include <lttng/tracepoint.h>
#  include <stdint.h>

/* One event per zone: its name and start time; LTTng stamps the end itself. */
LTTNG_UST_TRACEPOINT_EVENT(lotus_peers, zone,
                           LTTNG_UST_TP_ARGS(const char*, name, uint64_t, start_ns),
                           LTTNG_UST_TP_FIELDS(lttng_ust_field_string(name, name)
                                                   lttng_ust_field_integer(uint64_t, start_ns,
                                                                           start_ns)))

#endif

#include <lttng/tracepoint-event.h>
