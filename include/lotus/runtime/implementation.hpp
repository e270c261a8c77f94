// lotus — everything the implementation file compiles, in order (internal)
// SPDX-License-Identifier: MIT
// The one door: <lotus/lotus.hpp> includes this, last, in the one file of the program that defines
// LOTUS_IMPLEMENTATION, and no other header includes anything of the runtime (lotus/runtime/),
// the span annotations (lotus/annotations/) or the collectors (lotus/collectors/). The list is the
// whole implementation in the order it compiles, each header after those it includes: the system
// headers the runtime uses, the API it serves, the runtime, the annotations and the collectors,
// and last the table of the runtime's entry points (detail/entry_points.hpp's list, each row
// filled with its rt_<name> body).
#pragma once

// Every system header the headers below include, in one place (each also includes its own; the
// lint's check-layout.sh keeps this list whole). Two only under a condition, so only there: NVTX's
// <nvtx3/nvToolsExt.h> (nvtx.hpp, LOTUS_WITH_NVTX) and <valgrind/valgrind.h> (callgrind.hpp, off
// x86-64 when the header is there).
#if defined(__x86_64__) || defined(__i386__)
#  include <cpuid.h>  // __get_cpuid (calibration.hpp)
#endif
#include <dirent.h>        // opendir, readdir (capture_request.hpp)
#include <dlfcn.h>         // dlopen, dlsym (ITT, uProf)
#include <errno.h>         // errno
#include <fcntl.h>         // open, O_*
#include <glob.h>          // glob (amd.hpp)
#include <link.h>          // dl_iterate_phdr (ledger.hpp)
#include <poll.h>          // poll (perf.hpp)
#include <pthread.h>       // pthread_atfork, pthread_mutex_t
#include <sched.h>         // sched_yield, sched_getaffinity
#include <signal.h>        // sigfillset
#include <string.h>        // strnlen (live.hpp)
#include <sys/mman.h>      // memfd_create, mmap (ledger.hpp)
#include <sys/prctl.h>     // PR_GET_NAME
#include <sys/random.h>    // getrandom (capture_request.hpp)
#include <sys/resource.h>  // getrusage (resources.hpp)
#include <sys/stat.h>      // fstat, lstat, mkdir
#include <sys/statvfs.h>   // statvfs (trace_files.hpp)
#include <sys/syscall.h>   // SYS_gettid
#include <sys/timex.h>     // adjtimex (read-only: modes 0)
#include <time.h>          // clock_gettime, nanosleep
#include <unistd.h>        // gethostname, write, close

#include <cerrno>       // errno, EINTR
#include <chrono>       // milliseconds (options.hpp)
#include <cstdarg>      // va_list
#include <cstddef>      // size_t
#include <cstdint>      // uint64_t
#include <cstdio>       // snprintf
#include <cstdlib>      // atexit, malloc
#include <cstring>      // memcpy, strerror
#include <new>          // bad_alloc
#include <optional>     // optional (options.hpp, option_table.hpp)
#include <string>       // string (options.hpp, option_table.hpp)
#include <string_view>  // string_view
#include <type_traits>  // enable_if_t, is_same_v (text.hpp)

// clang-format off
#include "lotus/collector.hpp"               // the API it serves: collector control
#include "lotus/map_region.hpp"              // LOTUS_MAP_REGION
#include "lotus/options.hpp"                 // lotus::options, for configure
#include "lotus/runtime/diagnostics.hpp"     // the runtime (runtime/): one-line messages
#include "lotus/runtime/env.hpp"             // the environment
#include "lotus/runtime/text.hpp"            // a fixed-size string builder
#include "lotus/runtime/capture_request.hpp" // capture requests, triggers (lotus-tool shares it)
#include "lotus/runtime/settings.hpp"        // options > environment > defaults
#include "lotus/runtime/option_table.hpp"    // every option, declared once
#include "lotus/collectors/common.hpp"       // the collector backends' shared part
#include "lotus/collectors/itt.hpp"          // ITT's ABI mirror and loader
#include "lotus/annotations/itt_tasks.hpp"   // span annotations (annotations/): ITT tasks
#include "lotus/annotations/nvtx.hpp"        // NVTX ranges
#include "lotus/annotations/spans.hpp"       // a span's stack of both
#include "lotus/runtime/calibration.hpp"     // the TSC against the clock
#include "lotus/runtime/intern.hpp"          // run-time names
#include "lotus/runtime/fork_gate.hpp"       // sections a fork() waits for
#include "lotus/runtime/ledger.hpp"          // the process ledger: one byte budget
#include "lotus/runtime/resources.hpp"       // resource figures
#include "lotus/runtime/sync.hpp"            // the runtime's locks
#include "lotus/runtime/threads.hpp"         // the thread registry
#include "lotus/runtime/gpu_notes.hpp"       // the GPU's sidecar lines
#include "lotus/runtime/loader_kind.hpp"     // the loader and its epochs
#include "lotus/runtime/trace_files.hpp"     // trace files: creation, identity checks
#include "lotus/runtime/flight.hpp"          // the flight recorder
#include "lotus/runtime/live.hpp"            // the live figures
#include "lotus/runtime/memory.hpp"          // memory sampling
#include "lotus/runtime/writer.hpp"          // the writer thread
#include "lotus/runtime/runtime.hpp"         // start-up, fork, exit, signals; rt_<name>
#include "lotus/collectors/amd.hpp"          // the collectors (collectors/): uProf
#include "lotus/collectors/callgrind.hpp"    // Callgrind
#include "lotus/collectors/perf.hpp"         // perf
#include "lotus/collectors/impl.hpp"         // detection, nesting, the backend in use
#include "lotus/collectors/map.hpp"          // LOTUS_MAP_REGION's list mode, selection
#include "lotus/runtime/entry_table.hpp"     // last: the table of every rt_<name>
// clang-format on
