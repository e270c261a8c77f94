// lotus — lotus-tool: finding the files of a Lotus trace directory and reading sidecar metadata
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <istream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "format/line_reader.hpp"
#include "format/record.hpp"
#include "format/trace_name.hpp"

namespace lotus_tool {

/// `<prefix>_worker_pid_<id>` or `<prefix>_main_pid_<id>`, or a fresh variant
/// `<prefix>_worker_pid_r<k>_<id>` (the library's name when the plain one was taken).
struct trace_file {
  std::string
      name;  ///< (the prefix is the directory's: trace_dir::prefix); path: trace_dir::path_of
  // Owner, from the sidecars (see attribute_files): the writer process and its host.
  std::string host;          ///< that sidecar's host; empty when unknown
  std::uint64_t id = 0;      ///< the writer's thread id
  std::uint64_t pid = 0;     ///< the pid of the sidecar naming thread `id`; else `id`
  unsigned rev = 0;          ///< k of a fresh name `_r<k>_`; 0 for the plain name
  std::uint32_t source = 0;  ///< index into trace_dir::sources (the directory it came from)
  file_kind kind = file_kind::worker;
  bool ambiguous = false;  ///< thread `id` is named by sidecars of several hosts (reused ids)
};
// (Members ordered for size: 100k files must fit in a few MB.)

/// One trace directory given on the command line: one host or rank of a multi-node run.
struct trace_source {
  std::string path;
  std::string label;  ///< "<host> · rank <r>" from its sidecars, else the directory's name
  std::string host;   ///< the sidecars' host when they name exactly one
  std::optional<std::uint64_t> rank;  ///< the sidecars' rank when they name exactly one
};

/// From a `thread <tid> <name>` line of a sidecar.
struct thread_meta {
  std::uint64_t pid = 0;
  std::string host;
  std::string name;
};

/// (pid, host) of a process: pids are unique per host only. host is empty when unknown (a
/// sidecar without a `host` line, or no sidecar).
using process_key = std::pair<std::uint64_t, std::string>;

/// A `clocksync <start|exit> <realtime_ns> <monotonic_ns> <state> <status> <maxerror_us>
/// <esterror_us>` line: a clock pair and the kernel's NTP state (adjtimex) at that moment.
struct clock_sample {
  bool have = false;
  std::uint64_t realtime_ns = 0, monotonic_ns = 0;
  std::int64_t state = -1;  ///< adjtimex's return: TIME_OK 0 ... TIME_ERROR 5; -1: call failed
  std::int64_t status = 0, maxerror_us = 0, esterror_us = 0;
  /// The values are ones the kernel can report (plausible_clock_sample); a line with impossible
  /// ones vouches for nothing.
  bool plausible = true;
  /// The kernel says the clock is synchronized: the call worked, the state is not TIME_ERROR
  /// and STA_UNSYNC is clear.
  bool synchronized() const {
    return have && plausible && state >= 0 && state != 5 && (status & 0x40) == 0;
  }
};

/// Sums of a thread's sidecar `batchres` lines: its batches' time and what the thread did in it
/// (FORMAT.md §5). ns and counts.
struct resource_totals {
  std::uint64_t batches = 0, dur_ns = 0, cpu_ns = 0, wait_ns = 0;
  std::uint64_t minflt = 0, majflt = 0, nvcsw = 0, nivcsw = 0;
  std::uint64_t inblock = 0;  ///< 512-byte blocks read from storage (0: none, or not recorded)
  std::uint64_t lost = 0;  ///< `batchres_lost`: batches whose figures the runtime could not queue
  /// A sum reached 2^64 - 1 (held there, never wrapped): the figures are not to be shown.
  bool saturated = false;
  void add(const resource_totals& o) {
    saturated = saturated || o.saturated;
    const auto sum = [this](std::uint64_t& a, std::uint64_t b) {
      if (b > UINT64_MAX - a) {
        a = UINT64_MAX;
        saturated = true;
      } else {
        a += b;
      }
    };
    sum(batches, o.batches);
    sum(dur_ns, o.dur_ns);
    sum(cpu_ns, o.cpu_ns);
    sum(wait_ns, o.wait_ns);
    sum(minflt, o.minflt);
    sum(majflt, o.majflt);
    sum(nvcsw, o.nvcsw);
    sum(nivcsw, o.nivcsw);
    sum(inblock, o.inblock);
    sum(lost, o.lost);
  }
};

/// One `batchres` line: thread, batch index, its span (ns) and the thread's figures in it.
struct batch_resources {
  std::uint64_t pid = 0, tid = 0, idx = 0, start_ns = 0;
  resource_totals r;         ///< batches = 1
  std::uint32_t source = 0;  ///< index into trace_dir::sources (the directory of its sidecar)
};

/// A flight-recorder capture (the sidecar's `capture` line, FORMAT.md §5): why and when it was
/// taken, and the window each process wrote.
struct capture_meta {
  std::string id;
  std::uint64_t trigger_ns = 0;            ///< the triggering event (a wait's end) or the request
  std::uint64_t start_ns = 0, end_ns = 0;  ///< the window
  std::uint64_t pid = 0;                   ///< the request's pid filter (0: every process)
  std::string reason;
};

/// A capture sidecar's `inflight <tid> <batch|op|wait> <since_ns> <idx> <name>` line (FORMAT.md
/// §8): a span still in progress when the process wrote its part (the capture is cut there).
struct inflight_note {
  std::uint64_t tid = 0, since_ns = 0, idx = 0;
  std::string what;  ///< batch, op or wait
  std::string name;  ///< the op's name as traced without its S; "-" but for an op
};

/// `2026-11-25 22:06:32.123 UTC` for epoch nanoseconds.
std::string utc_text(std::uint64_t ns);
/// One line on a capture: `<reason>; triggered at <UTC> (<s> s into the <s> s window)`.
std::string capture_text(const capture_meta& c);
/// One sidecar `memory <realtime_ns> <rss> <pss> <private> <peak_rss> <peak_pss> <peak_private>
/// <rss_anon> <rss_shmem> <first_anon>` line (bytes; pss and private are 0 where the kernel has
/// no smaps_rollup; the resident anonymous and shared-memory pages, `kinds`, absent in an older
/// lotus's lines).
struct memory_sample {
  std::uint64_t ns = 0, rss = 0, pss = 0, priv = 0;
  std::uint64_t anon = 0, shmem = 0;
  bool kinds = false;
};

/// A process's `memory` lines: the peaks over every sample the runtime took (written or not) and
/// the samples written, in order (at most k_max_memory_samples; beyond, every other one is
/// dropped, so they still span the run).
struct process_memory {
  std::uint64_t peak_rss = 0, peak_pss = 0, peak_priv = 0;
  /// Its resident anonymous pages at its first sample (the runtime's, written or not; 0: not
  /// known): a forked worker's are its parent's pages, shared until one of them writes them.
  std::uint64_t first_anon = 0;
  std::vector<memory_sample> samples;
  bool recorded() const { return !samples.empty(); }
};
constexpr std::size_t k_max_memory_samples = 4096;

/// One sidecar `gpu <idx> <arrival_ns> <idle_ns> <step_ns|->` line (lotus.torch in a process
/// that uses CUDA; FORMAT.md §5): at the hand-over of batch idx (arrival: realtime ns), how long
/// the GPU had nothing to do because the batch was late, and its time for the step that followed
/// (-1: unknown, the loop left the iterator before asking again).
struct gpu_handover {
  std::uint64_t idx = 0, arrival_ns = 0, idle_ns = 0;
  std::int64_t step_ns = -1;
};
/// A process's `gpu` lines: the first k_max_gpu_handovers kept in order (the figures of a
/// window), and sums over all of them.
struct process_gpu {
  std::uint64_t handovers = 0, idle_ns = 0, steps = 0, step_ns = 0;
  std::uint64_t lost = 0;    ///< `gpu_lost`: hand-overs not measured (the last line counts)
  std::uint64_t beyond = 0;  ///< lines beyond k_max_gpu_handovers (in the sums, not kept)
  std::vector<gpu_handover> kept;
  bool recorded() const { return handovers != 0 || lost != 0; }
};
constexpr std::size_t k_max_gpu_handovers = std::size_t{1} << 20;

/// A `startup_worker` line: one worker's Process.start() in its iterator's __init__ (realtime
/// ns; pickled_ns 0: not pickled, a fork).
struct startup_start {
  std::uint64_t slot = 0, pid = 0, call_ns = 0, pickled_ns = 0, bytes = 0, return_ns = 0;
};
/// A `startup` line with its `startup_worker` and `startup_first` lines: one DataLoader
/// iterator that started workers, from iter(loader) (begin) to its first batch (first_ns 0: not
/// recorded).
/// One fork probe (ms): status "ok", or why it measured nothing ("failed", "timeout", "nobatch",
/// "cuda"; empty: no probe); the parent's fork() call, the child's start to its own code, its
/// setup, worker_init_fn (wall, CPU), one batch fetched and pickled as the result queue does.
/// Then one full garbage collection in the child, after its batch: its time and the private
/// memory it grew by (the pages of the parent's objects it copied), the part of the batch that
/// was a full collection already, and whether the collector runs by itself (gc_auto: 1 yes, 0 it
/// is disabled, -1 not measured: an older lotus).
struct fork_probe_figures {
  std::string status;
  double fork_ms = 0, start_ms = 0, setup_ms = 0, init_fn_ms = 0, init_cpu_ms = 0,
         first_batch_ms = 0;
  double full_gc_ms = 0, gc_copy_bytes = 0, batch_full_gc_ms = 0;
  int gc_auto = -1;
  /// The collector's distance to its next full collection (allocations; -1: not measured, an
  /// older lotus or a run without the marks): the untraced program's at this fork (exact, or a
  /// lower bound where lotus's count reached its limit), and what the child's first batch and a
  /// next one used of it.
  double gc_untraced = -1, gc_first_demand = -1, gc_next_demand = -1;
  bool gc_untraced_exact = false;
  /// lotus's own time inside the iterator's `__init__` for this line's measurement (the
  /// collector's distance at its first worker's start): not the program's (0: none, an older
  /// lotus).
  double own_ms = 0;
  /// The time the program waited for this probe (its fork, the child's work and exit; -1: not
  /// recorded, an older lotus): lotus's own, outside every figure the run measured.
  double wait_ms = -1;
  bool ok() const { return status == "ok"; }
};

struct startup_meta {
  std::uint64_t seq = 0;
  std::string method;  ///< fork, spawn, forkserver (or unknown)
  std::uint64_t workers = 0;
  bool persistent = false;
  std::uint64_t begin_ns = 0, init_end_ns = 0, first_idx = 0, first_ns = 0;
  std::vector<startup_start> starts;  ///< by slot, at most k_max_startup_workers
  /// `startup_forkserver` line (-1: none, an older lotus): the process's forkserver as this
  /// iterator began: already running (else a forkserver start starts it), and whether it imports
  /// the main module once (else each forkserver worker runs the script's imports again); the
  /// other modules it preloads ("-": none).
  int server_running = -1, server_preloads_main = -1;
  std::string server_modules;
  /// `startup_forkprobe` lines (LOTUS_FORK_PROBE=1, a spawn or forkserver run): a fork worker's
  /// start measured in a fork of this process before the iterator's start (`first`: as a fork
  /// run's first epoch finds the process) and at the end of its epoch (`later`).
  fork_probe_figures probe_first, probe_later;
  /// The `startup` line's last fields (absent: an older lotus): its loader's number in the
  /// process (-1: not known), where the loader was made and where iter() was called
  /// (`file:line:function`, unescaped; empty: not known).
  std::int64_t loader = -1;
  std::string site, iter_site;
};
/// A worker's `startup_boot` line (realtime ns; loaded/imported 0: forked).
struct startup_boot {
  std::uint64_t ppid = 0, slot = 0, loaded_ns = 0, imported_ns = 0, entered_ns = 0, init_ns = 0,
                init_dur_ns = 0, init_cpu_ns = 0, ready_ns = 0, cpu_ns = 0;
  /// At loaded_ns: the process's CPU time and its thread's run-queue wait + 1 (0: not read; a
  /// line of an older lotus has neither).
  std::uint64_t loaded_cpu_ns = 0, loaded_runq_ns = 0;
  /// Its resident anonymous memory (RssAnon) at loaded_ns and at ready_ns (0: not read: fork, or
  /// an older lotus): what it unpickled (the dataset) is the difference.
  std::uint64_t loaded_anon = 0, ready_anon = 0;
};
constexpr std::size_t k_max_startups = 4096;         ///< `startup` lines kept per process
constexpr std::size_t k_max_startup_workers = 4096;  ///< `startup_worker` lines per iterator

/// From one `.<prefix>.lotus-meta_<pid>` sidecar (or several with the same pid and host: a
/// reused directory; their stats are summed).
struct process_meta {
  std::uint64_t pid = 0;
  std::uint64_t ppid = 0;
  std::string host;
  std::optional<std::uint64_t> rank, local_rank, world_size;
  std::uint64_t cpus_online = 0, cpus_allowed = 0;  ///< `cpus` line; 0: not recorded
  /// `loader` line: which loader recorded the batches (torch, libtorch, pipeline); empty when
  /// the sidecar does not say (an unknown loader, or a trace of the original Lotus).
  std::string loader;
  /// `loader torch <version>`: the torch version lotus.torch ran with; empty: not said.
  std::string torch_version;
  /// `worker_id` line: the DataLoader worker this process was (lotus.torch); none: not one, or
  /// not said.
  std::optional<std::uint64_t> worker_id;
  /// `epoch <k> <start_ns>` lines: the epochs its loader began (k 0-based, the job's numbering),
  /// sorted by k, at most k_max_epoch_lines (the first kept; a capture's sidecar has the epoch
  /// in progress at its start and those begun in its window).
  std::vector<std::pair<std::uint64_t, std::uint64_t>> epochs;
  std::string version;
  std::string clock;
  clock_sample clock_start, clock_exit;  ///< `clocksync start` / the last `clocksync exit`
  bool has_stats = false;
  std::uint64_t recorded = 0, written = 0, dropped = 0, sanitized = 0;
  std::vector<std::string> sidecars;                   ///< labels (paths) of the sidecars read
  std::map<std::uint64_t, resource_totals> resources;  ///< tid -> its `batchres` sums
  /// op name -> the sums of its `opres` lines over the process's threads (LOTUS_RESOURCES=ops;
  /// `batches` counts ops). At most k_max_op_resources names; beyond, op_res_beyond.
  std::map<std::string, resource_totals> op_resources;
  std::uint64_t op_res_lost = 0;    ///< `opres_lost`: ops whose figures had no slot (all threads)
  std::uint64_t op_res_beyond = 0;  ///< `opres` lines of names beyond k_max_op_resources
  std::optional<capture_meta> capture;  ///< the sidecar of a capture
  std::vector<inflight_note> inflight;  ///< a capture's `inflight` lines (k_max_inflight_notes)
  process_memory memory;                ///< its `memory` lines
  process_gpu gpu;                      ///< its `gpu` lines (a process that used CUDA)
  std::vector<startup_meta> startups;   ///< its iterators' start-ups, by seq (a main process)
  std::optional<startup_boot> boot;     ///< its own start-up (a DataLoader worker)
};

constexpr std::size_t k_max_inflight_notes = 4096;  ///< `inflight` lines kept per process

constexpr std::size_t k_max_batch_resources = 65536;
constexpr std::size_t k_max_op_resources = 4096;
constexpr std::size_t k_max_epoch_lines = 4096;  ///< `epoch` lines kept per process
                                                 ///< op names per process with `opres` sums

struct trace_dir {
  std::string path;
  std::string prefix;
  std::vector<trace_file> files;  ///< sorted by (kind, id, rev): deterministic output
  /// tid -> every sidecar `thread` line naming it, in sidecar order (several: a reused directory,
  /// or thread ids reused across hosts).
  std::map<std::uint64_t, std::vector<thread_meta>> threads;
  std::map<process_key, process_meta> processes;
  /// trace file name -> the process whose sidecar lists it in a `file <name>` line (exact owner).
  std::map<std::string, process_key> file_owner;
  std::vector<std::string> warnings;  ///< unreadable/odd sidecar lines (never fatal)
  std::vector<trace_source> sources;  ///< the directories read (one unless several given)
  /// `batchres` lines in sidecar order, the first k_max_batch_resources of them (the report's
  /// per-batch bars); the sums in process_meta::resources count every line.
  std::vector<batch_resources> batch_res;
  std::uint64_t batch_res_beyond = 0;  ///< lines beyond that cap (summed, not kept)

  /// The sidecar line that owns thread `tid` (the last one read), or nullptr.
  const thread_meta* thread(std::uint64_t tid) const;
  /// The same among the lines of `host` (several directories may reuse thread ids); falls
  /// back to thread(tid).
  const thread_meta* thread(std::uint64_t tid, const std::string& host) const;
  /// Process id of a file's writer: the sidecar's mapping, else the id from the file name.
  std::uint64_t pid_of(std::uint64_t tid) const;
  /// The capture this directory is (the first process's `capture` line), or nullptr.
  const capture_meta* capture() const;
  /// The distinct non-empty hosts of the sidecars, sorted.
  std::vector<std::string> hosts() const;
  /// A file's path: its directory (sources[f.source]) and its name. Built on demand rather than
  /// stored: with 100k files a stored path was 6 MB.
  std::string path_of(const trace_file& f) const;
};

// parse_trace_file_name (prefix/kind/id/rev of a file name) is in trace_name.hpp.

/// Lists the trace files of `dir` (not recursive). `prefix` empty = auto-detect (must be unique).
/// Throws tool_error: exit_io (missing/unreadable dir, no trace files, prefix not found),
/// exit_usage (several prefixes and none chosen).
trace_dir scan_trace_dir(const std::string& dir, const std::string& prefix);

/// Several trace directories (one per host or rank) as one trace: files keep their directory
/// (trace_file::source), processes of different directories are never merged (a directory
/// whose sidecars name no host, or a host that several directories name, is told apart by
/// the directory's name), and each directory is labelled by its sidecars' host and rank, else
/// its name. Clocks of different hosts are taken as synchronized (NTP/PTP). Each directory
/// detects its own prefix when `prefix` is empty. One directory: scan_trace_dir.
trace_dir scan_trace_dirs(const std::vector<std::string>& dirs, const std::string& prefix);
/// scan_trace_dirs in two steps: each directory scanned and split by rank into parts (one
/// source each, labelled), with dir_of[k] the index into `dirs` of part k ...
std::vector<trace_dir> scan_trace_parts(const std::vector<std::string>& dirs,
                                        const std::string& prefix,
                                        std::vector<std::size_t>& dir_of);
/// ... and the parts as one trace (labels told apart, processes keyed by host). Also the merge of
/// summaries (trace/summary.hpp), whose parts are rebuilt from the files.
trace_dir merge_trace_parts(std::vector<trace_dir> parts, const std::vector<std::size_t>& dir_of);

/// What the sidecars of one host say about its clock.
struct host_clock {
  std::string host;
  std::uint64_t processes = 0;  ///< processes of that host with a `clocksync` line
  bool synchronized = false;    ///< every sample of the host: NTP-synchronized
  bool implausible = false;     ///< a sample holds values no kernel reports (never synchronized)
  /// The largest maxerror the kernel reported (µs): how far CLOCK_REALTIME may be from true time.
  std::int64_t error_bound_us = 0;
  /// The largest change of CLOCK_REALTIME against CLOCK_MONOTONIC between a process's start and
  /// exit samples (ns, absolute): steps and slewing during the run.
  std::uint64_t realtime_adjusted_ns = 0;
};

/// Values adjtimex can return: state -1 (the call failed) or TIME_OK..TIME_ERROR (0..5), status
/// within the 16 STA_* bits, maxerror and esterror within 0..NTP_PHASE_LIMIT-bounded 16 s, and
/// a start no later than the exit (monotonic).
bool plausible_clock_sample(const clock_sample& c);

/// Per host with `clocksync` lines, sorted by host. Hosts without them are not listed.
std::vector<host_clock> host_clocks(const trace_dir& dir);

/// The bound (µs) within which times of two different hosts can be compared: the sum of the two
/// largest host bounds plus the largest adjustment seen. Empty with fewer than two hosts that
/// have clock lines, or when a host is not synchronized (nothing can be vouched for).
std::optional<double> cross_host_bound_us(const std::vector<host_clock>& clocks);

/// With two hosts or more on one time axis (viz, report), reports once (a note) within what bound
/// their times compare, from the sidecars' clocksync lines (or that nothing can be vouched for).
void warn_cross_host_clocks(const trace_dir& dir);
/// That sentence (without "note: "); empty with fewer than two hosts.
std::string cross_host_clock_note(const trace_dir& dir);

/// Which records a command looks at (--epoch, --from/--to, --ops); the default keeps all.
struct record_filter {
  std::uint64_t lo_ns = 0, hi_ns = UINT64_MAX;  ///< record start in [lo_ns, hi_ns]
  /// Op names (with the leading 'S') to keep; empty = every op. Batch records always pass.
  std::vector<std::string> ops;
  /// --epoch: the batch records of that epoch, (kind, source, idx, start) sorted; others of
  /// the kinds that have epochs are dropped whatever their time.
  bool by_epoch = false;
  std::vector<std::tuple<std::uint8_t, std::uint32_t, std::uint64_t, std::uint64_t>> epoch_batches;
  std::string description;  ///< "epoch 1", "12.5 s to 20 s", "ops Loader, Normalize"
  bool active() const { return lo_ns != 0 || hi_ns != UINT64_MAX || !ops.empty() || by_epoch; }
  bool keep(std::uint32_t source, const record& r, const batch_ref& b) const;
};

/// The window options of viz, stats and report.
struct window_options {
  std::optional<std::uint64_t> epoch;  ///< 0-based, as the `epoch` of viz's args
  std::optional<double> from_s, to_s;  ///< seconds from the first record of the trace
  std::vector<std::string> ops;        ///< op names, with or without the leading 'S'
};

/// Resolves window options against the trace (one light pass over every file when --epoch or
/// --from/--to are given). Throws tool_error(exit_usage) for an empty or inverted window and
/// tool_error(exit_invalid) for an epoch the trace does not have.
record_filter make_filter(const trace_dir& dir, const window_options& w);
/// Parses one sidecar; unknown keys are ignored, malformed lines become warnings. Bounded: lines
/// over 64 KiB and `thread`/`file` lines beyond 65536 are counted in a warning and ignored.
void parse_sidecar(std::istream& in, const std::string& file_label, trace_dir& out);
/// What of the sidecars is worth keeping: the `thread` lines of thread ids that have a trace
/// file and the `file` lines naming one (a sidecar lists every thread of its process; 60
/// sidecars of 65,536 thread lines took 1.9 GB when all were kept). Views into `files`.
class sidecar_keep {
 public:
  explicit sidecar_keep(const std::vector<trace_file>& files);
  bool thread(std::uint64_t tid) const;
  bool file(std::string_view name) const;

 private:
  std::vector<std::uint64_t> ids_;
  std::vector<std::string_view> names_;
};
/// parse_sidecar streamed from a file (memory does not grow with its size). `keep`: nullptr
/// keeps every line (up to the per-sidecar bounds).
void parse_sidecar_file(const std::string& path, trace_dir& out,
                        const sidecar_keep* keep = nullptr);

/// Sets each file's owner (pid, host, ambiguous) from the sidecars read into `dir`, and adds a
/// warning when hosts reuse pids or thread ids. scan_trace_dir calls it.
///
/// A file listed by a sidecar's `file <name>` line belongs to that sidecar's process. Otherwise
/// (sidecars of older versions) a file of thread `tid` belongs to the process whose sidecar names
/// `tid`. When sidecars of several hosts name the same tid, nothing in the file tells which host
/// wrote it: the file is `ambiguous`, and commands show it apart (its own row) rather than merge it
/// with another host's thread. Sidecars of one host naming the same tid (a directory reused by a
/// later run) are not ambiguous: the last one read owns the thread.
void attribute_files(trace_dir& dir);

/// How commands treat malformed lines: stop at the first one (default) or skip and count.
struct read_options {
  bool skip_invalid = false;
  const record_filter* filter = nullptr;  ///< records it rejects are not passed to fn
  bool warn_empty = true;  ///< print "warning: <file>: empty trace file" for a file without lines
};

/// Streams every record of every file to `fn(file_index, record, batch_ref)`, or to
/// `fn(file_index, record, batch_ref, line_number)` when fn takes four arguments. Strict mode
/// throws tool_error(exit_invalid) with `file:line: reason` on the first malformed line; skip
/// mode returns the number skipped. A template so the per-record call inlines.
template <class F>
std::uint64_t for_each_record(const trace_dir& dir, const read_options& opt, F&& fn);

/// Reports `warning: <path>: empty trace file (no records)` (util/diag.hpp).
void warn_empty_file(const std::string& path);

/// Throws tool_error(exit_invalid): `path:line: why (run 'lotus-tool check' ...)`.
[[noreturn]] void throw_bad_line(const std::string& path, std::uint64_t line, const char* why);

// validate_line and for_each_line (a file's lines, each validated as `check` does) are in
// format/line_reader.hpp.

template <class F>
std::uint64_t for_each_record(const trace_dir& dir, const read_options& opt, F&& fn) {
  std::uint64_t skipped = 0;
  for (std::size_t i = 0; i < dir.files.size(); ++i) {
    const std::string path = dir.path_of(dir.files[i]);
    const bool any = for_each_line(path, [&](const line_reader::line& ln, const char* why,
                                             const record& rec, const batch_ref& batch) {
      if (why != nullptr) {
        if (opt.skip_invalid) {
          ++skipped;
          return;
        }
        throw_bad_line(path, ln.number, why);
      }
      if (opt.filter != nullptr && !opt.filter->keep(dir.files[i].source, rec, batch)) return;
      if constexpr (std::is_invocable_v<F&, std::size_t, const record&, const batch_ref&,
                                        std::uint64_t>) {
        fn(i, rec, batch, ln.number);
      } else {
        fn(i, rec, batch);
      }
    });
    if (!any && opt.warn_empty) warn_empty_file(path);
  }
  return skipped;
}

/// The job's epoch (its loader's numbering, the sidecars' `epoch` lines of the process `pid` on
/// `host`, else of any process) in progress at `t_ns`; empty when no sidecar says.
std::optional<std::uint64_t> job_epoch_at(const trace_dir& dir, std::uint64_t pid,
                                          const std::string& host, std::uint64_t t_ns);

/// One line when the sidecars count a noticeable share (>= 1 %) of the events as dropped, or of
/// the batches' or ops' resource figures as lost (`stats` lines; `batchres_lost`, `opres_lost`):
/// what the trace lacks, for `stats` and `check`. Empty otherwise.
std::string dropped_share_note(const trace_dir& dir);

}  // namespace lotus_tool
