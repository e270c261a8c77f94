// lotus — the Python extension `lotus._lotus`: the same runtime as the C++ headers, for Python
// SPDX-License-Identifier: MIT
//
// This file: the module's table and its cold API (configure, stats, collector, BatchTracker),
// through pybind11. The hot objects (scope, map_region, the record primitives lotus.torch calls
// per sample) are written against the CPython C API in files of their own (_lotus.hpp lists them).
// The module is its own program's runtime: it is the one file that defines LOTUS_IMPLEMENTATION.
#define LOTUS_IMPLEMENTATION
// And the option table's way from a keyword's value to lotus::options (option_put), which only
// configure needs.
#define LOTUS_DETAIL_OPTION_PUT

#include "_lotus.hpp"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <signal.h>
#include <time.h>

#include <cstdint>
#include <string>

#include "lotus/lotus.hpp"
#include "lotus/options.hpp"

namespace py = pybind11;

namespace {

// ---- SIGTERM in DataLoader workers ------------------------------------------------------------

// Workers still alive at interpreter exit are SIGTERMed (multiprocessing's exit handler), and
// torch's worker handler _exit()s: their last records would never reach disk although the main
// process consumed those batches. This handler, installed in each worker after torch's, flushes
// lotus (bounded; not at all when the signal interrupted lotus itself) and then runs torch's.
struct sigaction g_prev_sigterm {};
bool g_sigterm_hooked = false;

void on_sigterm(int sig, siginfo_t* info, void* context) {
  lotus::flush();
  const struct sigaction& prev = g_prev_sigterm;
  if ((prev.sa_flags & SA_SIGINFO) != 0) {
    if (prev.sa_sigaction != nullptr) prev.sa_sigaction(sig, info, context);
  } else if (prev.sa_handler == SIG_DFL) {
    ::signal(sig, SIG_DFL);
    ::raise(sig);
  } else if (prev.sa_handler != SIG_IGN && prev.sa_handler != nullptr) {
    prev.sa_handler(sig);
  }
}

void flush_on_sigterm() {
  if (g_sigterm_hooked) return;
  struct sigaction sa {};
  sa.sa_sigaction = on_sigterm;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (::sigaction(SIGTERM, &sa, &g_prev_sigterm) == 0) g_sigterm_hooked = true;
}

// ---- configure ---------------------------------------------------------------------------------

// Keywords, ranges, spellings, the refusal text and the mapping to lotus::options come from
// lotus/runtime/option_table.hpp, as for the environment; lotus/__init__.py checks the same table
// first.

/// "lotus.configure: <field>='<value>' (expected <what>)": the table's message, raised.
std::string option_refusal(const lotus::detail::option_desc& d, const std::string& value,
                           const char* expected_text = nullptr) {
  char expected[160];
  lotus::detail::option_expected(d, expected, sizeof expected);
  return std::string("lotus.configure: ") + d.field + "='" + value + "' (expected " +
         (expected_text != nullptr ? expected_text : expected) + ")";
}

/// The index of `value` among the choices of `d`.
int option_choice(const lotus::detail::option_desc& d, const std::string& value) {
  for (int i = 0; d.choices[i] != nullptr; ++i) {
    if (value == d.choices[i]) return i;
  }
  throw py::value_error(option_refusal(d, value));
}

/// One keyword of configure as the row's value (checked against the row), or a TypeError.
lotus::detail::option_value option_from_python(const lotus::detail::option_desc& d,
                                               const py::handle x, std::string& text) {
  using lotus::detail::option_kind;
  lotus::detail::option_value v;
  try {
    switch (d.kind) {
      case option_kind::uint:
      case option_kind::bytes:
        v.n = x.cast<std::uint64_t>();
        if (v.n < d.min || v.n > d.max)
          throw py::value_error(option_refusal(d, std::to_string(v.n)));
        break;
      case option_kind::flag:
        if (py::isinstance<py::str>(x)) {  // a spelling (resources="ops")
          v.index = option_choice(d, x.cast<std::string>());
          v.n = lotus::detail::option_flag_truth(d, static_cast<std::uint64_t>(v.index));
        } else {
          v.n = x.cast<bool>() ? 1 : 0;
        }
        break;
      case option_kind::choice:
        v.n = static_cast<std::uint64_t>(option_choice(d, x.cast<std::string>()));
        break;
      case option_kind::prefix:
      case option_kind::path:
        text = x.cast<std::string>();
        if (const char* expected = lotus::detail::option_text_problem(
                static_cast<lotus::detail::opt>(&d - lotus::detail::option_table), text.data(),
                text.size())) {
          if (d.kind == option_kind::prefix) {
            throw py::value_error(std::string(d.field) + " contains a control character");
          }
          throw py::value_error(option_refusal(d, text, expected));
        }
        v.text = text.data();
        v.size = text.size();
        break;
    }
  } catch (const py::cast_error&) {
    throw py::type_error(std::string("lotus.configure: ") + d.field + " has the wrong type (" +
                         std::string(py::str(py::type::handle_of(x).attr("__name__"))) + ")");
  }
  return v;
}

/// lotus.configure's keywords, each a field of the option table (None: unset), into
/// lotus::options through each row's binding; the ranges, spellings and refusal text are the
/// table's. Any other keyword is a TypeError.
void configure(const py::kwargs& kw) {
  lotus::options o;
  for (const auto& item : kw) {
    const std::string name = py::str(item.first);
    const lotus::detail::option_desc* row = nullptr;
    for (const auto& d : lotus::detail::option_table) {
      if (d.field != nullptr && name == d.field) row = &d;
    }
    if (row == nullptr) {
      throw py::type_error("_configure() got an unexpected keyword argument '" + name + "'");
    }
    if (item.second.is_none()) continue;
    std::string text;
    lotus::detail::option_put(static_cast<lotus::detail::opt>(row - lotus::detail::option_table), o,
                              option_from_python(*row, item.second, text));
  }
  lotus::configure(o);
}

/// The option table, one tuple per row: (field or None, env, kind, min, max, default,
/// default_text, choices, expected, doc). default: the number, or the index into choices.
py::list option_table() {
  static const char* const kinds[] = {"prefix", "flag", "uint", "choice", "bytes", "path"};
  py::list rows;
  for (const auto& d : lotus::detail::option_table) {
    py::tuple choices(0);
    if (d.choices != nullptr) {
      py::list c;
      for (int i = 0; d.choices[i] != nullptr; ++i) c.append(d.choices[i]);
      choices = py::tuple(c);
    }
    char expected[160];
    lotus::detail::option_expected(d, expected, sizeof expected);
    char shown[96];
    lotus::detail::option_value_text(d, d.def, shown, sizeof shown);
    rows.append(py::make_tuple(d.field != nullptr ? py::object(py::str(d.field)) : py::none(),
                               d.env, kinds[static_cast<unsigned>(d.kind)], d.min, d.max, d.def,
                               std::string(shown), choices, std::string(expected), d.doc));
  }
  return rows;
}

}  // namespace

PYBIND11_MODULE(_lotus, m) {
  m.doc() = "lotus runtime (LotusTrace/LotusMap) for Python; use the `lotus` package";

  m.attr("VERSION") = LOTUS_VERSION_STRING;
  lotus_python::add_scope(m);
  lotus_python::add_record(m);
  lotus_python::add_steps(m);
  lotus_python::add_format(m);
  lotus_python::add_model(m);

  m.def(
      "nvtx_compiled", [] { return lotus::detail::nvtx_compiled(); },
      "Whether this build pushes NVTX ranges when asked (LOTUS_NVTX / configure(nvtx=True)).");
  m.def("_flush_on_sigterm", &flush_on_sigterm,
        "In a DataLoader worker: flush lotus when SIGTERM arrives, then run the previous handler.");

  m.def("_configure", &configure,
        "lotus.configure's keywords (the option table's fields; None: unset), checked against the "
        "table and applied as lotus::options.");
  m.def(
      "capture", [](const std::string& reason) { return lotus::capture(reason); },
      py::arg("reason") = "lotus.capture", py::call_guard<py::gil_scoped_release>(),
      "Flight mode (LOTUS_FLIGHT): ask every process tracing into this trace directory for a\n"
      "capture of its last LOTUS_FLIGHT seconds (DIR/capture-<id>/); returns at once, False when\n"
      "flight mode is off.");
  m.def("_option_table", &option_table,
        "The run-time option table (lotus/runtime/option_table.hpp): (field, env, kind, min, max, "
        "default, default_text, choices, expected, doc) per option.");
  // The runtime may wait for its writer thread (I/O): let other Python threads run meanwhile.
  m.def(
      "flush", [] { lotus::flush(); }, py::call_guard<py::gil_scoped_release>(),
      "Block until every event recorded before the call is in its trace file.");
  m.def(
      "shutdown", [] { lotus::shutdown(); }, py::call_guard<py::gil_scoped_release>(),
      "Flush and stop the writer; tracing stays off until the next configure().");
  m.def("_stats", [] {
    const lotus::trace_stats s = lotus::stats();
    return py::make_tuple(s.recorded, s.written, s.dropped, s.sanitized);
  });
  m.def(
      "_declare_torch_loader",
      [](const std::string& torch_version) {
        lotus::detail::declare_loader_version(torch_version.data(), torch_version.size());
        lotus::detail::declare_loader("torch", true);
      },
      py::arg("torch_version") = std::string(),
      "The sidecar says the batches come from PyTorch's DataLoader (lotus.torch.instrument), of\n"
      "this torch version (`loader torch <version>`: lotus-tool advises no argument it lacks).");
  m.def(
      "_declare_nodes_loader", [] { lotus::detail::declare_loader("nodes", true); },
      "The sidecar says the items come from a torchdata.nodes pipeline (lotus.loaders.nodes).");
  m.def(
      "_declare_worker_id", [](long long id) { lotus::detail::declare_worker_id(id); },
      "The sidecar's `worker_id` line: this process is the DataLoader's worker `id`.");
  m.def(
      "_startup_progress",
      [](std::uint64_t begin_ns, std::uint64_t workers, std::uint64_t started,
         std::uint64_t first_ns, std::uint64_t init_end_ns) {
        lotus::detail::note_startup_progress(begin_ns, workers, started, first_ns, init_end_ns);
      },
      py::arg("begin_ns"), py::arg("workers"), py::arg("started"), py::arg("first_ns"),
      py::arg("init_end_ns") = 0,
      "An iterator's start in progress (the live file's `startup` line): since begin_ns, "
      "`started` of `workers` workers started, its first batch at first_ns (0: not yet), its "
      "__init__'s return at init_end_ns (0: not yet).");
  // A loader iterator's start-up gate (inflight.hpp): 4 words at `address`, in memory shared
  // with its worker processes (lotus.loaders._startup maps it).
  m.attr("STARTUP_GATE_BYTES") = sizeof(lotus::detail::startup_gate);
  m.attr("GATE_NONE") = lotus::detail::gate_none;
  m.def(
      "_startup_gate_open",
      [](std::uintptr_t address, std::uint64_t gen, std::uint64_t workers) {
        lotus::detail::startup_gate_open(*reinterpret_cast<lotus::detail::startup_gate*>(address),
                                         gen, workers);
      },
      py::arg("address"), py::arg("gen"), py::arg("workers"),
      "The gate at `address` is iterator gen's (gen 0: free), which starts `workers` workers.");
  m.def(
      "_startup_gate_begun",
      [](std::uintptr_t address, std::uint64_t gen) {
        timespec ts{};
        ::clock_gettime(CLOCK_REALTIME, &ts);
        lotus::detail::startup_gate_begun(*reinterpret_cast<lotus::detail::startup_gate*>(address),
                                          gen,
                                          static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u +
                                              static_cast<std::uint64_t>(ts.tv_nsec));
      },
      py::arg("address"), py::arg("gen"),
      "A worker of iterator gen begins its first item now (in the worker process).");
  m.def(
      "_startup_gate_state",
      [](std::uintptr_t address) {
        const auto& g = *reinterpret_cast<const lotus::detail::startup_gate*>(address);
        const std::uint64_t gen = g.gen.load(lotus::detail::mo_acquire);
        return py::make_tuple(
            gen, g.workers.load(lotus::detail::mo_relaxed), g.begun.load(lotus::detail::mo_acquire),
            g.last_ns.load(lotus::detail::mo_relaxed), lotus::detail::startup_gate_until(g, gen));
      },
      py::arg("address"),
      "(gen, workers, begun, last_ns, until_ns) of the gate at `address`: until_ns is until when "
      "a wait under it is start-up (2**64-1: some worker has not begun).");
  m.def(
      "_note_epoch", [](std::uint64_t start_ns) { lotus::detail::note_epoch(start_ns); },
      py::arg("start_ns") = 0,
      "The loader begins an epoch: the sidecar's `epoch` line (lotus.torch, at the first index), "
      "begun at start_ns (realtime ns; 0: now; an iterator that starts workers: iter(loader)).");
  m.def(
      "_note_gpu_lines",
      [](const py::bytes& lines) {
        const std::string_view v(lines);
        const auto r = lotus::detail::note_gpu_lines(v.data(), v.size());
        // The writer started if it is not yet (a process that records nothing still writes them).
        if (r == lotus::detail::gpu_note_result::kept) lotus::detail::runtime::get().start_writer();
        return static_cast<int>(r);
      },
      "Queues whole sidecar lines (lotus.loaders._gpu, _startup) for the writer's next cycle, the "
      "writer started if tracing is on: 0 kept, 1 no room (refused whole), 2 the writer holds the "
      "queue just now (try again later).");
  m.def(
      "tracing_enabled", [] { return lotus::tracing_enabled(); },
      "True when events are being recorded.");
  py::module_ c = m.def_submodule("collector", "drive the attached profiler");
  c.def(
      "initialize", [] { lotus::collector::initialize(); },
      "Detect the collector now (LOTUS_COLLECTOR) instead of at the first call.");
  c.def(
      "resume", [] { lotus::collector::resume(); }, py::call_guard<py::gil_scoped_release>(),
      "Start collection; nests process-wide (only the outermost resume acts).");
  c.def(
      "pause", [] { lotus::collector::pause(); }, py::call_guard<py::gil_scoped_release>(),
      "Stop collection when the outermost resume is matched.");
  c.def(
      "detach", [] { lotus::collector::detach(); }, py::call_guard<py::gil_scoped_release>(),
      "Pause if needed and detach; every later collector call does nothing.");
  c.def(
      "attached",
      [] { return std::string(lotus::collector::to_string(lotus::collector::attached())); },
      "'none', 'perf', 'itt', 'amd' or 'callgrind'.");
  c.def(
      "depth", [] { return lotus::collector::depth(); }, "Current process-wide resume depth.");

  py::class_<lotus::batch_tracker>(m, "BatchTracker",
                                   "Consumer side of a data loader by the Lotus rules "
                                   "(SBatchQueued, SBatchWait, SBatchConsumed), as C++ "
                                   "lotus::batch_tracker.")
      .def(py::init<>())
      .def("queued", &lotus::batch_tracker::queued, py::arg("idx"),
           "An index was handed to a worker: SBatchQueued_<idx>,<now>,1000.")
      .def("wait_begin", &lotus::batch_tracker::wait_begin,
           "The consumer starts waiting for the next batch (once per next() call).")
      .def("arrived", &lotus::batch_tracker::arrived, py::arg("idx"),
           "A batch arrived; True when in order. Out of order: SBatchWait_<idx>,<now>,1000.")
      .def("consumed", &lotus::batch_tracker::consumed, py::arg("idx"),
           "The batch was handed on: its kept wait, then SBatchConsumed_<idx>,<now>,1000.")
      .def("reset", &lotus::batch_tracker::reset, "New epoch: batch indices restart at 0.")
      .def_property_readonly("expected", &lotus::batch_tracker::expected,
                             "Index of the batch the consumer needs next.");
}
