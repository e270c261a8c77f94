/* lotus — LTTng-UST probe definitions for the peers benchmark */
/* SPDX-License-Identifier: MIT */
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "lotus_peers_tp.h"
