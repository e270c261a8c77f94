// lotus — lotus._lotus: lotus.torch's record primitives, written against the CPython C API
// SPDX-License-Identifier: MIT
// The calls lotus.torch makes per sample and per batch: a span timed in Python and recorded
// after the fact (_now, _record), the batch records (_batch), what a thread is inside now (the
// live file, the stall triggers) and NVTX ranges.
#include <cstdint>
#include <string_view>

#include "_lotus.hpp"
#include "lotus/lotus.hpp"

namespace lotus_python {

namespace {

using lotus::detail::g_mode;
using lotus::detail::mo_relaxed;
using lotus::detail::mode_tsc;

// ---- record primitives (lotus.torch) ------------------------------------------------------------
// Timestamps are raw ticks of the runtime's clock (TSC cycles or epoch ns); 0 means "tracing was
// off when the span started" and is never recorded.

PyObject* py_now(PyObject*, PyObject*) {
  const int m = lotus::detail::active_mode();
  return PyLong_FromUnsignedLongLong(m >= mode_tsc ? lotus::detail::now_ticks(m) : 0);
}

/// _record(name, t0, t1): S<name>,<t0>,<t1 - t0> in the calling thread's worker file.
PyObject* py_record(PyObject*, PyObject* const* args, Py_ssize_t n) {
  if (n != 3) {
    PyErr_SetString(PyExc_TypeError, "_record(name, t0, t1)");
    return nullptr;
  }
  std::string_view sv;
  std::uint64_t t0 = 0, t1 = 0;
  if (!name_view(args[0], sv, "_record") || !u64_arg(args[1], t0, "t0") ||
      !u64_arg(args[2], t1, "t1")) {
    return nullptr;
  }
  if (t0 != 0 && g_mode.load(mo_relaxed) >= mode_tsc) {
    if (const lotus::record_site* loc = lotus::detail::dynamic_location(sv)) {
      lotus::detail::emit(*loc, t0, t1 < t0 ? t0 : t1, 0);
    }
  }
  Py_RETURN_NONE;
}

enum batch_kind { k_preprocessed, k_wait, k_wait_marker, k_queued, k_consumed };

const lotus::record_site& batch_loc(batch_kind k) {
  switch (k) {
    case k_preprocessed:
      return lotus::detail::batch_preprocessed_loc;
    case k_wait:
      return lotus::detail::batch_wait_loc;
    case k_wait_marker:
      return lotus::detail::batch_wait_marker_loc;
    case k_queued:
      return lotus::detail::batch_queued_loc;
    case k_consumed:
      break;
  }
  return lotus::detail::batch_consumed_loc;
}

/// The worker thread's resource figures at its batch's start (_res_begin), for the
/// SBatchPreprocessed record that ends it (_batch): batch boundaries only, never per op.
thread_local lotus::detail::res_sample t_batch_res;

/// _res_begin(): read the thread's resource figures now (a worker's batch starts).
PyObject* py_res_begin(PyObject*, PyObject*) {
  t_batch_res = lotus::detail::resources_read();
  Py_RETURN_NONE;
}

// ---- what a thread is inside now (include/lotus/detail/inflight.hpp) ---------------------------
// lotus.torch records its spans after the fact (_now()/_record()); these publish them while they
// last, so that the writer sees a stalled batch, op or wait (LOTUS_TRIGGER, the live file).

/// _batch_begin(idx): a worker batch starts: the thread's resource figures are read (as
/// _res_begin) and the batch is in progress; its start (raw ticks, 0 when tracing is off), for
/// _batch(BATCH_PREPROCESSED, idx, start, end), which ends it (or _batch_abandon()).
PyObject* py_batch_begin(PyObject*, PyObject* arg) {
  std::uint64_t idx = 0;
  if (!u64_arg(arg, idx, "idx")) return nullptr;
  const int m = g_mode.load(mo_relaxed);
  if (m < mode_tsc) return PyLong_FromLong(0);
  t_batch_res = lotus::detail::resources_read();
  const std::uint64_t t0 = lotus::detail::now_ticks(m);
  if (lotus::detail::inflight* f = lotus::detail::inflight_registered()) {
    lotus::detail::inflight_batch(*f, idx, t0);
  }
  return PyLong_FromUnsignedLongLong(t0);
}

/// _batch_abandon(): the batch begun ends without a record (the fetch raised).
PyObject* py_batch_abandon(PyObject*, PyObject*) {
  if (lotus::detail::inflight* f = lotus::detail::inflight_self()) {
    lotus::detail::inflight_batch(*f, 0, 0);
  }
  Py_RETURN_NONE;
}

/// _wait_begin(idx[, gate, gen]): the main process starts waiting for batch idx; its start (raw
/// ticks, 0 when tracing is off). _wait_done() ends it. gate: the wait's start-up gate (0: the
/// process-wide range of a C++ consumer; 1: none, no start-up in this wait; else the address of
/// the iterator's startup_gate, of iterator gen: start-up while some worker has not begun).
PyObject* py_wait_begin(PyObject*, PyObject* const* args, Py_ssize_t n) {
  std::uint64_t idx = 0, gate = lotus::detail::gate_range, gen = 0;
  if (n != 1 && n != 3) {
    PyErr_SetString(PyExc_TypeError, "_wait_begin(idx[, gate, gen]): 1 or 3 arguments");
    return nullptr;
  }
  if (!u64_arg(args[0], idx, "idx")) return nullptr;
  if (n == 3 && (!u64_arg(args[1], gate, "gate") || !u64_arg(args[2], gen, "gen"))) return nullptr;
  const int m = g_mode.load(mo_relaxed);
  if (m < mode_tsc) return PyLong_FromLong(0);
  const std::uint64_t t0 = lotus::detail::now_ticks(m);
  if (lotus::detail::inflight* f = lotus::detail::inflight_registered()) {
    lotus::detail::inflight_wait_gate(*f, idx, t0, gate, gen);
  }
  return PyLong_FromUnsignedLongLong(t0);
}

PyObject* py_wait_done(PyObject*, PyObject*) {
  if (lotus::detail::inflight* f = lotus::detail::inflight_self()) {
    lotus::detail::inflight_wait(*f, 0, 0);
  }
  Py_RETURN_NONE;
}

/// _op_enter(name): the op `name` starts on this thread; a token for _op_leave (0: not shown).
PyObject* py_op_enter(PyObject*, PyObject* name) {
  std::string_view sv;
  if (!name_view(name, sv, "_op_enter")) return nullptr;
  const int m = g_mode.load(mo_relaxed);
  if (m < mode_tsc) return PyLong_FromLong(0);
  lotus::detail::inflight* f = lotus::detail::inflight_registered();
  const lotus::record_site* loc = f != nullptr ? lotus::detail::dynamic_location(sv) : nullptr;
  if (loc == nullptr) return PyLong_FromLong(0);
  const std::uint32_t d = lotus::detail::inflight_enter(*f, loc, lotus::detail::now_ticks(m));
  return PyLong_FromUnsignedLong(static_cast<unsigned long>(d) + 1u);
}

/// _op_leave(token): the op _op_enter started ends.
PyObject* py_op_leave(PyObject*, PyObject* arg) {
  std::uint64_t token = 0;
  if (!u64_arg(arg, token, "token")) return nullptr;
  if (token != 0 && token <= 0xffffffffu) {
    if (lotus::detail::inflight* f = lotus::detail::inflight_self()) {
      lotus::detail::inflight_leave(*f, static_cast<std::uint32_t>(token - 1));
    }
  }
  Py_RETURN_NONE;
}

/// _batch(kind, idx[, t0, t1]): a batch record; without t0/t1 the record is a marker at "now".
PyObject* py_batch(PyObject*, PyObject* const* args, Py_ssize_t n) {
  if (n != 2 && n != 4) {
    PyErr_SetString(PyExc_TypeError, "_batch(kind, idx[, t0, t1])");
    return nullptr;
  }
  const long kind = PyLong_AsLong(args[0]);
  if (kind == -1 && PyErr_Occurred()) return nullptr;
  if (kind < k_preprocessed || kind > k_consumed) {
    PyErr_SetString(PyExc_ValueError, "_batch: unknown kind");
    return nullptr;
  }
  std::uint64_t idx = 0, t0 = 0, t1 = 0;
  if (!u64_arg(args[1], idx, "idx")) return nullptr;
  if (n == 4 && (!u64_arg(args[2], t0, "t0") || !u64_arg(args[3], t1, "t1"))) return nullptr;
  const int m = g_mode.load(mo_relaxed);
  if (m >= mode_tsc) {
    if (n == 2) {
      t0 = lotus::detail::now_ticks(m);
      t1 = t0;
    }
    if (t0 != 0 && n == 4 && kind == k_wait) {  // its start-up part, before the writer sees it
      if (lotus::detail::inflight* f = lotus::detail::inflight_self()) {
        lotus::detail::inflight_wait_exempt(*f, t0, idx);
      }
    }
    if (t0 != 0) lotus::detail::emit(batch_loc(static_cast<batch_kind>(kind)), t0, t1, idx);
    if (t0 != 0 && n == 4 && kind == k_preprocessed) {
      if (lotus::detail::inflight* f = lotus::detail::inflight_self()) {
        if (f->batch_t0.load(mo_relaxed) == t0) lotus::detail::inflight_batch(*f, 0, 0);
      }
      lotus::detail::resources_record(t_batch_res, t0, t1, idx);
      t_batch_res = lotus::detail::res_sample{};
    }
    if (n == 2 && m >= lotus::detail::mode_tsc_nvtx) {  // markers are NVTX marks
      lotus::detail::nvtx_mark(batch_loc(static_cast<batch_kind>(kind)), idx);
    }
  }
  Py_RETURN_NONE;
}

// ---- NVTX ranges of lotus.torch's spans (lotus.configure(nvtx=True)) ---------------------------
// lotus.torch times its spans with _now()/_record(); with NVTX on it also calls these around them.

/// _nvtx_push(name): push an NVTX range (domain lotus) on this thread; True when pushed.
PyObject* py_nvtx_push(PyObject*, PyObject* name) {
  std::string_view sv;
  if (!name_view(name, sv, "_nvtx_push")) return nullptr;
  if (!lotus::detail::annotations_active()) Py_RETURN_FALSE;
  const lotus::record_site* loc = lotus::detail::dynamic_location(sv);
  if (loc != nullptr && lotus::detail::nvtx_push(*loc, 0)) Py_RETURN_TRUE;
  Py_RETURN_FALSE;
}

/// _nvtx_batch_push(idx): push the range BatchPreprocessed_<idx> (payload idx); True when pushed.
PyObject* py_nvtx_batch_push(PyObject*, PyObject* arg) {
  std::uint64_t idx = 0;
  if (!u64_arg(arg, idx, "idx")) return nullptr;
  if (lotus::detail::nvtx_push(lotus::detail::batch_preprocessed_loc, idx)) Py_RETURN_TRUE;
  Py_RETURN_FALSE;
}

/// _nvtx_on(): whether spans are annotated now (NVTX ranges or ITT tasks: _nvtx_push does both).
PyObject* py_nvtx_on(PyObject*, PyObject*) {
  if (lotus::detail::annotations_active()) Py_RETURN_TRUE;
  Py_RETURN_FALSE;
}

PyObject* py_nvtx_ranges_on(PyObject*, PyObject*) {
  if (lotus::detail::nvtx_active()) Py_RETURN_TRUE;
  Py_RETURN_FALSE;
}

PyObject* py_itt_on(PyObject*, PyObject*) {
  if (lotus::detail::itt_active()) Py_RETURN_TRUE;
  Py_RETURN_FALSE;
}

PyObject* py_nvtx_pop(PyObject*, PyObject*) {
  lotus::detail::nvtx_pop();
  Py_RETURN_NONE;
}

/// _nvtx_wait_start(): the NVTX range of a consumer's wait (ended by _nvtx_end); 0 when off.
PyObject* py_nvtx_wait_start(PyObject*, PyObject*) {
  return PyLong_FromUnsignedLongLong(
      lotus::detail::nvtx_start(lotus::detail::batch_wait_range_loc, 0));
}

PyObject* py_nvtx_end(PyObject*, PyObject* arg) {
  std::uint64_t id = 0;
  if (!u64_arg(arg, id, "id")) return nullptr;
  lotus::detail::nvtx_end(id);
  Py_RETURN_NONE;
}

PyMethodDef record_methods[] = {
    {"_nvtx_push", py_nvtx_push, METH_O, "_nvtx_push(name): push an NVTX range when NVTX is on."},
    {"_res_begin", py_res_begin, METH_NOARGS,
     "_res_begin(): read the thread's resource figures at a batch's start."},
    {"_batch_begin", py_batch_begin, METH_O,
     "_batch_begin(idx): a worker batch starts (resources read, in progress); its start."},
    {"_batch_abandon", py_batch_abandon, METH_NOARGS,
     "_batch_abandon(): the batch begun ends unrecorded."},
    {"_wait_begin", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_wait_begin)),
     METH_FASTCALL,
     "_wait_begin(idx[, gate, gen]): the main process waits for batch idx (in progress), under "
     "start-up gate `gate` of iterator `gen`; its start."},
    {"_wait_done", py_wait_done, METH_NOARGS, "_wait_done(): the wait ended."},
    {"_op_enter", py_op_enter, METH_O, "_op_enter(name): an op in progress; a token."},
    {"_op_leave", py_op_leave, METH_O, "_op_leave(token): the op of _op_enter ended."},
    {"_nvtx_batch_push", py_nvtx_batch_push, METH_O,
     "_nvtx_batch_push(idx): push BatchPreprocessed_<idx> when NVTX is on."},
    {"_nvtx_on", py_nvtx_on, METH_NOARGS, "Whether spans push NVTX ranges or ITT tasks now."},
    {"_nvtx_ranges_on", py_nvtx_ranges_on, METH_NOARGS, "Whether spans push NVTX ranges now."},
    {"_itt_on", py_itt_on, METH_NOARGS, "Whether spans are ITT tasks now."},
    {"_nvtx_pop", py_nvtx_pop, METH_NOARGS, "_nvtx_pop(): pop the range _nvtx_push pushed."},
    {"_nvtx_wait_start", py_nvtx_wait_start, METH_NOARGS, "NVTX range of a wait (0: off)."},
    {"_nvtx_end", py_nvtx_end, METH_O, "_nvtx_end(id): end a range of _nvtx_wait_start."},
    {"_now", py_now, METH_NOARGS, "Raw timestamp of the runtime's clock, 0 when tracing is off."},
    {"_record", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_record)),
     METH_FASTCALL, "_record(name, t0, t1): record an already-timed span S<name>."},
    {"_batch", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_batch)), METH_FASTCALL,
     "_batch(kind, idx[, t0, t1]): record one SBatch* record."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

void add_record(py::module_& m) {
  if (PyModule_AddFunctions(m.ptr(), record_methods) < 0) throw py::error_already_set();
  m.attr("BATCH_PREPROCESSED") = static_cast<int>(k_preprocessed);
  m.attr("BATCH_WAIT") = static_cast<int>(k_wait);
  m.attr("BATCH_WAIT_MARKER") = static_cast<int>(k_wait_marker);
  m.attr("BATCH_QUEUED") = static_cast<int>(k_queued);
  m.attr("BATCH_CONSUMED") = static_cast<int>(k_consumed);
}

}  // namespace lotus_python
