// lotus — the Python extension `lotus._lotus`: the same runtime as the C++ headers, for Python
// SPDX-License-Identifier: MIT
//
// Hot objects (scope, map_region, the record primitives lotus.torch calls per sample) are written
// against the CPython C API: a `with lotus.scope("Op"):` then costs an object allocation and two C
// calls. pybind11 dispatch (argument conversion, overload resolution) would triple that. The cold
// API (configure, stats, collector, BatchTracker) uses pybind11.
// The module is its own program's runtime: it is the one file that defines LOTUS_IMPLEMENTATION.
#define LOTUS_IMPLEMENTATION
// And the option table's way from a keyword's value to lotus::options (option_put), which only
// configure needs.
#define LOTUS_DETAIL_OPTION_PUT

#include <fcntl.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "lotus/lotus.hpp"
#include "lotus/map_region.hpp"
#include "lotus/options.hpp"

namespace py = pybind11;

namespace {

using lotus::detail::g_mode;
using lotus::detail::mo_relaxed;
using lotus::detail::mode_tsc;

// ---- helpers -----------------------------------------------------------------------------------

/// The UTF-8 view of a str (no copy for compact ASCII strings); false with a TypeError set.
bool name_view(PyObject* name, std::string_view& out, const char* what) {
  if (!PyUnicode_Check(name)) {
    PyErr_Format(PyExc_TypeError, "%s: the name must be a str, not %.100s", what,
                 Py_TYPE(name)->tp_name);
    return false;
  }
  Py_ssize_t n = 0;
  const char* p = PyUnicode_AsUTF8AndSize(name, &n);
  if (p == nullptr) return false;  // e.g. lone surrogates: UnicodeEncodeError is set
  out = std::string_view(p, static_cast<std::size_t>(n));
  return true;
}

/// A non-negative int that fits in 64 bits; false with an exception set.
bool u64_arg(PyObject* o, std::uint64_t& out, const char* what) {
  if (!PyLong_Check(o)) {
    PyErr_Format(PyExc_TypeError, "%s must be an int, not %.100s", what, Py_TYPE(o)->tp_name);
    return false;
  }
  const unsigned long long v = PyLong_AsUnsignedLongLong(o);
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "%s must be a non-negative int below 2**64", what);
    return false;
  }
  out = v;
  return true;
}

/// The decorator factory installed by lotus/__init__.py (scope("Op")(fn) calls it).
PyObject* g_decorate = nullptr;

// ---- lotus.scope -------------------------------------------------------------------------------

struct scope_object {
  PyObject_HEAD PyObject* name;  // str
  bool active;
  alignas(lotus::scope_timer) unsigned char timer[sizeof(lotus::scope_timer)];
};

PyObject* scope_new(PyTypeObject* type, PyObject* name) {
  if (!PyUnicode_Check(name)) {
    PyErr_Format(PyExc_TypeError, "lotus.scope(name): name must be a str, not %.100s",
                 Py_TYPE(name)->tp_name);
    return nullptr;
  }
  auto* self = PyObject_New(scope_object, type);
  if (self == nullptr) return nullptr;
  Py_INCREF(name);
  self->name = name;
  self->active = false;
  return reinterpret_cast<PyObject*>(self);
}

PyObject* scope_vectorcall(PyObject* type, PyObject* const* args, std::size_t nargsf,
                           PyObject* kwnames) {
  const Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  if (n != 1 || (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) != 0)) {
    PyErr_SetString(PyExc_TypeError, "lotus.scope(name) takes exactly one positional argument");
    return nullptr;
  }
  return scope_new(reinterpret_cast<PyTypeObject*>(type), args[0]);
}

PyObject* scope_tp_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  if (PyTuple_GET_SIZE(args) != 1 || (kwargs != nullptr && PyDict_GET_SIZE(kwargs) != 0)) {
    PyErr_SetString(PyExc_TypeError, "lotus.scope(name) takes exactly one positional argument");
    return nullptr;
  }
  return scope_new(type, PyTuple_GET_ITEM(args, 0));
}

void scope_dealloc(PyObject* o) {
  // Entered and never exited (a generator dropped mid-with): nothing is recorded.
  Py_XDECREF(reinterpret_cast<scope_object*>(o)->name);
  PyObject_Free(o);
}

PyObject* scope_enter(PyObject* o, PyObject*) {
  auto* self = reinterpret_cast<scope_object*>(o);
  if (self->active) {
    PyErr_SetString(PyExc_RuntimeError,
                    "this lotus.scope is already entered; use one lotus.scope(...) per 'with'");
    return nullptr;
  }
  std::string_view sv;
  if (!name_view(self->name, sv, "lotus.scope")) return nullptr;
  new (self->timer) lotus::scope_timer(lotus::detail::dynamic_name_tag{}, sv);
  self->active = true;
  Py_INCREF(o);
  return o;
}

PyObject* scope_exit(PyObject* o, PyObject* const*, Py_ssize_t) {
  auto* self = reinterpret_cast<scope_object*>(o);
  if (!self->active) {
    PyErr_SetString(PyExc_RuntimeError, "lotus.scope: __exit__ without __enter__");
    return nullptr;
  }
  self->active = false;
  std::launder(reinterpret_cast<lotus::scope_timer*>(self->timer))->~scope_timer();
  Py_RETURN_FALSE;
}

PyObject* scope_call(PyObject* o, PyObject* args, PyObject* kwargs) {
  auto* self = reinterpret_cast<scope_object*>(o);
  if (PyTuple_GET_SIZE(args) != 1 || (kwargs != nullptr && PyDict_GET_SIZE(kwargs) != 0) ||
      !PyCallable_Check(PyTuple_GET_ITEM(args, 0))) {
    PyErr_SetString(PyExc_TypeError,
                    "lotus.scope(name) decorates exactly one callable: @lotus.scope(\"Op\")");
    return nullptr;
  }
  if (g_decorate == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "lotus: import lotus, not lotus._lotus");
    return nullptr;
  }
  return PyObject_CallFunctionObjArgs(g_decorate, self->name, PyTuple_GET_ITEM(args, 0), nullptr);
}

PyObject* scope_repr(PyObject* o) {
  return PyUnicode_FromFormat("lotus.scope(%R)", reinterpret_cast<scope_object*>(o)->name);
}

PyObject* scope_get_name(PyObject* o, void*) {
  PyObject* n = reinterpret_cast<scope_object*>(o)->name;
  Py_INCREF(n);
  return n;
}

PyMethodDef scope_methods[] = {
    {"__enter__", scope_enter, METH_NOARGS, "Start the span."},
    {"__exit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(scope_exit)),
     METH_FASTCALL, "End the span and record S<name>,<start_ns>,<duration_ns>."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef scope_getset[] = {
    {"name", scope_get_name, nullptr, "the op name (recorded as S<name>)", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject scope_type = [] {
  PyTypeObject t{};
  Py_SET_REFCNT(reinterpret_cast<PyObject*>(&t), 1);
  t.tp_name = "lotus.scope";
  t.tp_basicsize = sizeof(scope_object);
  t.tp_dealloc = scope_dealloc;
  t.tp_repr = scope_repr;
  t.tp_call = scope_call;
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = PyDoc_STR(
      "scope(name)\n--\n\n"
      "A span recorded as S<name>,<start_ns>,<duration_ns> in the calling thread's trace file.\n"
      "Use as `with lotus.scope(\"Op\"):` or as a decorator `@lotus.scope(\"Op\")`.");
  t.tp_methods = scope_methods;
  t.tp_getset = scope_getset;
  t.tp_new = scope_tp_new;
  t.tp_vectorcall = scope_vectorcall;
  return t;
}();

// ---- lotus.map_region --------------------------------------------------------------------------

struct map_region_object {
  PyObject_HEAD PyObject* name;
  const lotus::record_site* loc;  // interned: process lifetime (the map gate keeps name ptrs)
  bool active;
  alignas(lotus::map_region) unsigned char region[sizeof(lotus::map_region)];
};

PyObject* map_region_tp_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  if (PyTuple_GET_SIZE(args) != 1 || (kwargs != nullptr && PyDict_GET_SIZE(kwargs) != 0)) {
    PyErr_SetString(PyExc_TypeError,
                    "lotus.map_region(name) takes exactly one positional argument");
    return nullptr;
  }
  PyObject* name = PyTuple_GET_ITEM(args, 0);
  std::string_view sv;
  if (!name_view(name, sv, "lotus.map_region")) return nullptr;
  if (sv.empty() || sv.find('\0') != std::string_view::npos) {
    PyErr_SetString(PyExc_ValueError, "lotus.map_region: the name must be non-empty, without NUL");
    return nullptr;
  }
  const lotus::record_site* loc = nullptr;
  try {
    loc = &lotus::detail::intern(sv);
  } catch (const std::bad_alloc&) {
    return PyErr_NoMemory();
  }
  auto* self = PyObject_New(map_region_object, type);
  if (self == nullptr) return nullptr;
  Py_INCREF(name);
  self->name = name;
  self->loc = loc;
  self->active = false;
  return reinterpret_cast<PyObject*>(self);
}

void map_region_dealloc(PyObject* o) {
  auto* self = reinterpret_cast<map_region_object*>(o);
  if (self->active) {  // keep the collector balanced even if __exit__ never ran
    self->active = false;
    std::launder(reinterpret_cast<lotus::map_region*>(self->region))->~map_region();
  }
  Py_XDECREF(self->name);
  PyObject_Free(o);
}

PyObject* map_region_enter(PyObject* o, PyObject*) {
  auto* self = reinterpret_cast<map_region_object*>(o);
  if (self->active) {
    PyErr_SetString(PyExc_RuntimeError, "this lotus.map_region is already entered");
    return nullptr;
  }
  new (self->region) lotus::map_region(*self->loc);
  self->active = true;
  Py_INCREF(o);
  return o;
}

PyObject* map_region_exit(PyObject* o, PyObject* const*, Py_ssize_t) {
  auto* self = reinterpret_cast<map_region_object*>(o);
  if (!self->active) {
    PyErr_SetString(PyExc_RuntimeError, "lotus.map_region: __exit__ without __enter__");
    return nullptr;
  }
  self->active = false;
  std::launder(reinterpret_cast<lotus::map_region*>(self->region))->~map_region();
  Py_RETURN_FALSE;
}

PyObject* map_region_repr(PyObject* o) {
  return PyUnicode_FromFormat("lotus.map_region(%R)",
                              reinterpret_cast<map_region_object*>(o)->name);
}

PyMethodDef map_region_methods[] = {
    {"__enter__", map_region_enter, METH_NOARGS, "Enter the region (resume when selected)."},
    {"__exit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(map_region_exit)),
     METH_FASTCALL, "Leave the region (pause when selected) and record S<name>."},
    {nullptr, nullptr, 0, nullptr}};

PyTypeObject map_region_type = [] {
  PyTypeObject t{};
  Py_SET_REFCNT(reinterpret_cast<PyObject*>(&t), 1);
  t.tp_name = "lotus.map_region";
  t.tp_basicsize = sizeof(map_region_object);
  t.tp_dealloc = map_region_dealloc;
  t.tp_repr = map_region_repr;
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = PyDoc_STR(
      "map_region(name)\n--\n\n"
      "A LotusMap region of a probe program: records S<name>; when LOTUS_MAP_SELECT names it,\n"
      "the attached collector (perf, Callgrind, VTune, uProf) runs around the selected "
      "executions.");
  t.tp_methods = map_region_methods;
  t.tp_new = map_region_tp_new;
  return t;
}();

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

// ---- torchvision's per-sample spans (lotus/loaders/torchvision.py) -----------------------------
// A DatasetFolder sample (SLoader, STransform) and each step of a Compose (S<step>), timed here
// rather than in Python: a worker runs them for every sample between JPEG decodes, where the
// interpreter's part of Python wrappers (a dozen calls a step) is no longer in the caches.

/// functools.partial, for a step's name (its function's); nullptr until first needed.
PyObject* g_partial_type = nullptr;

/// The record name of a Compose step whose own name cannot be taken (a `func` or `__name__` that
/// raises, a name that is no str or cannot be encoded, such as a lone surrogate): the step runs
/// and is recorded under this name (lotus.loaders.torchvision.UNNAMED_STEP).
constexpr std::string_view unnamed_step{"lotus_unnamed_step"};

/// Clears an exception of the Exception family (a name that cannot be taken: the placeholder is
/// used); false, with the exception kept, for KeyboardInterrupt, SystemExit and the like.
bool clear_name_error() {
  if (!PyErr_ExceptionMatches(PyExc_Exception)) return false;
  PyErr_Clear();
  return true;
}

/// A new reference to the record name of a Compose step (lotus.loaders.torchvision.step_name):
/// a plain or built-in function's own name ("function" without one), a partial's function's,
/// else the step's class name. nullptr with an exception set (the caller decides whether it
/// stands for the placeholder: clear_name_error).
PyObject* step_name(PyObject* step) {
  PyObject* held = nullptr;  // the innermost partial's function (a subclass may make a new one)
  PyObject* out = nullptr;
  for (int depth = 0;; ++depth) {
    if (PyFunction_Check(step) || PyCFunction_Check(step)) {
      PyObject* n = PyObject_GetAttrString(step, "__name__");
      if (n == nullptr && !clear_name_error()) {
        Py_XDECREF(held);
        return nullptr;
      }
      if (n != nullptr && PyUnicode_Check(n) && PyUnicode_GET_LENGTH(n) > 0) {
        out = n;
      } else {
        Py_XDECREF(n);
        out = PyUnicode_FromString("function");
      }
      Py_XDECREF(held);
      return out;
    }
    if (g_partial_type == nullptr) {
      PyObject* functools = PyImport_ImportModule("functools");
      if (functools != nullptr) {
        g_partial_type = PyObject_GetAttrString(functools, "partial");
        Py_DECREF(functools);
      }
      if (g_partial_type == nullptr) {
        Py_XDECREF(held);
        return nullptr;
      }
    }
    if (depth == 64 || !PyType_Check(g_partial_type) ||
        !PyObject_TypeCheck(step, reinterpret_cast<PyTypeObject*>(g_partial_type))) {
      break;
    }
    PyObject* fn = PyObject_GetAttrString(step, "func");
    if (fn == nullptr) {
      Py_XDECREF(held);
      return nullptr;
    }
    Py_XDECREF(held);
    held = step = fn;
  }
#if PY_VERSION_HEX >= 0x030B0000
  out = PyType_GetName(Py_TYPE(step));
#else
  out = PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(step)), "__name__");
#endif
  Py_XDECREF(held);
  return out;
}

/// The interned location of a step's record; nullptr when it has none (tracing off, out of
/// memory). A name that cannot be taken or encoded is the placeholder (unnamed_step): the step
/// still runs. `failed` only for an exception that must propagate (KeyboardInterrupt ...).
const lotus::record_site* step_location(PyObject* step, bool& failed) {
  failed = false;
  PyObject* name = step_name(step);
  std::string_view sv;
  bool named = name != nullptr && PyUnicode_Check(name);
  if (named) {
    Py_ssize_t n = 0;
    const char* p = PyUnicode_AsUTF8AndSize(name, &n);
    named = p != nullptr && n > 0;
    if (named) sv = std::string_view(p, static_cast<std::size_t>(n));
  }
  if (!named && PyErr_Occurred() && !clear_name_error()) {
    Py_XDECREF(name);
    failed = true;
    return nullptr;
  }
  if (!named) sv = unnamed_step;
  const lotus::record_site* loc = lotus::detail::dynamic_location(sv);
  Py_XDECREF(name);
  return loc;
}

/// One call fn(arg) timed as the op at `loc` (fn nullptr: no call, `arg` itself is the result):
/// in progress while it runs (the live file, the stall triggers), inside an NVTX range or ITT
/// task when `ranges`; its span in t0/t1. A new reference, nullptr with the call's exception.
PyObject* timed_call(PyObject* fn, PyObject* arg, int m, lotus::detail::inflight* f,
                     const lotus::record_site* loc, bool ranges, std::uint64_t& t0,
                     std::uint64_t& t1) {
  const bool pushed = ranges && loc != nullptr && lotus::detail::nvtx_push(*loc, 0);
  const bool shown = f != nullptr && loc != nullptr;
  t0 = lotus::detail::now_ticks(m);
  const std::uint32_t d = shown ? lotus::detail::inflight_enter(*f, loc, t0) : 0;
  PyObject* out = fn != nullptr ? PyObject_CallOneArg(fn, arg) : (Py_INCREF(arg), arg);
  t1 = lotus::detail::now_ticks(m);
  if (shown) lotus::detail::inflight_leave(*f, d);
  if (pushed) lotus::detail::nvtx_pop();
  if (t1 < t0) t1 = t0;
  return out;
}

struct step_span {
  const lotus::record_site* loc;
  std::uint64_t t0, t1;
};

/// A Compose call's spans, kept until its last step: on the stack for up to 16 steps.
struct span_list {
  step_span small[16];
  std::vector<step_span> large;
  std::size_t size = 0;

  /// False when out of memory (Python's list append would raise MemoryError there too).
  bool add(const step_span& s) noexcept {
    if (size < 16 && large.empty()) {
      small[size++] = s;
      return true;
    }
    try {
      if (large.empty()) large.assign(small, small + size);
      large.push_back(s);
    } catch (const std::bad_alloc&) {
      return false;
    }
    ++size;
    return true;
  }
  const step_span* data() const noexcept { return large.empty() ? small : large.data(); }
};

/// _compose(steps, x): x = step(x) for each step in order, each recorded S<step name>; the lines
/// of one call are written together after the last step (a nested Compose's lines come before its
/// parent's, as Lotus writes them); nothing is recorded when a step raises. With NVTX or ITT on,
/// each step is also a range. Tracing off: the steps alone.
PyObject* py_compose(PyObject*, PyObject* const* args, Py_ssize_t n) {
  if (n != 2) {
    PyErr_SetString(PyExc_TypeError, "_compose(steps, x)");
    return nullptr;
  }
  PyObject* it = PyObject_GetIter(args[0]);
  if (it == nullptr) return nullptr;
  PyObject* x = args[1];
  Py_INCREF(x);
  const int m = lotus::detail::active_mode();
  const bool on = m >= mode_tsc;
  const bool ranges = on && lotus::detail::annotations_active();
  lotus::detail::inflight* f = on ? lotus::detail::inflight_registered() : nullptr;
  span_list spans;
  while (PyObject* step = PyIter_Next(it)) {
    const lotus::record_site* loc = nullptr;
    bool failed = false;
    if (on) loc = step_location(step, failed);
    std::uint64_t t0 = 0, t1 = 0;
    PyObject* out = failed ? nullptr
                    : on   ? timed_call(step, x, m, f, loc, ranges, t0, t1)
                           : PyObject_CallOneArg(step, x);
    Py_DECREF(step);
    Py_DECREF(x);
    x = out;
    if (out == nullptr) break;
    if (loc != nullptr && !spans.add({loc, t0, t1})) {
      PyErr_NoMemory();
      break;
    }
  }
  Py_DECREF(it);
  if (PyErr_Occurred()) {
    Py_XDECREF(x);
    return nullptr;
  }
  const step_span* sp = spans.data();
  for (std::size_t i = 0; i < spans.size; ++i)
    lotus::detail::emit(*sp[i].loc, sp[i].t0, sp[i].t1, 0);
  return x;
}

/// _folder_sample(loader, path, transform): DatasetFolder's sample, loader(path) then
/// transform(sample) (transform None: none), recorded SLoader and STransform after both (after a
/// traced Compose's own lines, as Lotus writes them; STransform even without a transform), each
/// also a range with NVTX or ITT on. Nothing is recorded when either raises.
PyObject* py_folder_sample(PyObject*, PyObject* const* args, Py_ssize_t n) {
  if (n != 3) {
    PyErr_SetString(PyExc_TypeError, "_folder_sample(loader, path, transform)");
    return nullptr;
  }
  PyObject* transform = args[2] == Py_None ? nullptr : args[2];
  const int m = lotus::detail::active_mode();
  const bool on = m >= mode_tsc;
  lotus::detail::inflight* f = on ? lotus::detail::inflight_registered() : nullptr;
  const bool ranges = on && lotus::detail::annotations_active();
  static constexpr std::string_view loader_name{"Loader"}, transform_name{"Transform"};
  const lotus::record_site* load_loc = on ? lotus::detail::dynamic_location(loader_name) : nullptr;
  std::uint64_t l0 = 0, l1 = 0, t0 = 0, t1 = 0;
  PyObject* sample = on ? timed_call(args[0], args[1], m, f, load_loc, ranges, l0, l1)
                        : PyObject_CallOneArg(args[0], args[1]);
  if (sample == nullptr) return nullptr;
  const lotus::record_site* transform_loc =
      on ? lotus::detail::dynamic_location(transform_name) : nullptr;
  PyObject* out = on ? timed_call(transform, sample, m, f, transform_loc, ranges, t0, t1)
                  : transform != nullptr ? PyObject_CallOneArg(transform, sample)
                                         : (Py_INCREF(sample), sample);
  Py_DECREF(sample);
  if (out == nullptr) return nullptr;
  if (load_loc != nullptr) lotus::detail::emit(*load_loc, l0, l1, 0);
  if (transform_loc != nullptr) lotus::detail::emit(*transform_loc, t0, t1, 0);
  return out;
}

// ---- worker_init_fn, timed (lotus/loaders/_startup.py's TimedInit) ----------------------------
// Timed here rather than in a Python wrapper: a C call adds no frame to the traceback of an
// exception the function raises, so torch's "Original Traceback" shows the user's frames only.

/// The last timed call's start (CLOCK_REALTIME ns, as time.time_ns()), wall and thread CPU ns.
std::uint64_t g_timed_init[3] = {0, 0, 0};

std::uint64_t clock_now_ns(clockid_t clock) {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

/// _timed_init(fn, *args, **kwargs): fn(*args, **kwargs), its figures kept (_timed_init_figures)
/// whether it returns or raises.
PyObject* py_timed_init(PyObject*, PyObject* args, PyObject* kwargs) {
  const Py_ssize_t n = PyTuple_GET_SIZE(args);
  if (n < 1) {
    PyErr_SetString(PyExc_TypeError, "_timed_init(fn, *args, **kwargs)");
    return nullptr;
  }
  PyObject* rest = PyTuple_GetSlice(args, 1, n);
  if (rest == nullptr) return nullptr;
  const std::uint64_t t0 = clock_now_ns(CLOCK_REALTIME), c0 = clock_now_ns(CLOCK_THREAD_CPUTIME_ID);
  PyObject* out = PyObject_Call(PyTuple_GET_ITEM(args, 0), rest, kwargs);
  const std::uint64_t t1 = clock_now_ns(CLOCK_REALTIME), c1 = clock_now_ns(CLOCK_THREAD_CPUTIME_ID);
  Py_DECREF(rest);
  g_timed_init[0] = t0;
  g_timed_init[1] = t1 > t0 ? t1 - t0 : 0;
  g_timed_init[2] = c1 > c0 ? c1 - c0 : 0;
  return out;
}

/// _timed_init_figures(): (start_ns, wall_ns, cpu_ns) of the last _timed_init call; 0 0 0: none.
PyObject* py_timed_init_figures(PyObject*, PyObject*) {
  return Py_BuildValue("(KKK)", static_cast<unsigned long long>(g_timed_init[0]),
                       static_cast<unsigned long long>(g_timed_init[1]),
                       static_cast<unsigned long long>(g_timed_init[2]));
}

PyMethodDef module_methods[] = {
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
    {"_compose", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_compose)),
     METH_FASTCALL, "_compose(steps, x): apply each step in turn, each recorded S<step name>."},
    {"_folder_sample",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_folder_sample)), METH_FASTCALL,
     "_folder_sample(loader, path, transform): a DatasetFolder sample, SLoader and STransform."},
    {"_timed_init", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_timed_init)),
     METH_VARARGS | METH_KEYWORDS,
     "_timed_init(fn, *args, **kwargs): fn's call, its start, wall and CPU time kept."},
    {"_timed_init_figures", py_timed_init_figures, METH_NOARGS,
     "_timed_init_figures(): (start_ns, wall_ns, cpu_ns) of the last _timed_init call."},
    {nullptr, nullptr, 0, nullptr}};

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

// ---- trace reader (lotus.frame) ----------------------------------------------------------------
// lotus.frame's columns, parsed here by lotus-tool's rules (tools/lotus-tool/trace/record.cpp and
// line_reader.cpp): a record is `S<name>,<start>,<dur>` with both numbers plain base-10 within
// int64, blanks allowed around them and a '\r' before the '\n'; `SBatchPreprocessed_<i>`,
// `SBatchWait_<i>`, `SBatchConsumed_<i>` and `SBatchQueued_<i>` need a decimal index. Every other
// line is skipped and counted, as `lotus-tool stats --skip-invalid` skips it: an empty line, a
// last line without its '\n' (a writer still writing), a line past 16 MiB.

namespace frame_reader {

constexpr std::uint64_t k_int64_max = 9223372036854775807ULL;
constexpr std::size_t k_max_line = std::size_t{16} << 20;
constexpr std::size_t k_chunk = std::size_t{1} << 20;
// The batch kinds: the record's prefix, and its name in the column `op`.
constexpr std::string_view k_batch_prefixes[] = {"SBatchPreprocessed_", "SBatchWait_",
                                                 "SBatchConsumed_", "SBatchQueued_"};

bool number(std::string_view s, std::uint64_t& out) noexcept {
  if (s.empty() || s.size() > 19) return false;  // 19 digits cannot overflow uint64
  std::uint64_t v = 0;
  for (const char ch : s) {
    const auto d = static_cast<unsigned>(ch - '0');
    if (d > 9) return false;
    v = v * 10 + d;
  }
  if (v > k_int64_max) return false;
  out = v;
  return true;
}

std::string_view trim_blanks(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

/// The records of the files read so far, one entry per record in each column.
struct columns {
  std::vector<std::int32_t> code;   // index into names
  std::vector<std::int64_t> batch;  // the batch index, -1 for op records
  std::vector<std::int64_t> start;
  std::vector<std::int64_t> dur;
  std::vector<std::string> names;  // op names as in the trace; batch kinds without the index
  std::unordered_map<std::string, std::int32_t> index;
  std::string key;  // intern's scratch
  std::int32_t last = -1;

  std::int32_t intern(std::string_view name) {
    if (last >= 0 && names[static_cast<std::size_t>(last)] == name) return last;
    key.assign(name.data(), name.size());
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, static_cast<std::int32_t>(names.size())).first;
      names.push_back(key);
    }
    return last = it->second;
  }

  /// One line without its '\n'; false when lotus-tool rejects it.
  bool add_line(std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::size_t c1 = line.find(',');
    if (c1 == std::string_view::npos) return false;
    const std::size_t c2 = line.find(',', c1 + 1);
    if (c2 == std::string_view::npos || line.find(',', c2 + 1) != std::string_view::npos) {
      return false;
    }
    std::string_view name = line.substr(0, c1);
    std::uint64_t s = 0;
    std::uint64_t d = 0;
    if (name.empty() || name[0] != 'S' ||
        !number(trim_blanks(line.substr(c1 + 1, c2 - c1 - 1)), s) ||
        !number(trim_blanks(line.substr(c2 + 1)), d)) {
      return false;
    }
    std::int64_t idx = -1;
    if (name.compare(0, 6, "SBatch") == 0) {
      for (const std::string_view prefix : k_batch_prefixes) {
        if (name.compare(0, prefix.size(), prefix) != 0) continue;
        std::uint64_t i = 0;
        if (!number(name.substr(prefix.size()), i)) return false;
        idx = static_cast<std::int64_t>(i);
        name = prefix.substr(0, prefix.size() - 1);
        break;
      }
    }
    code.push_back(intern(name));
    batch.push_back(idx);
    start.push_back(static_cast<std::int64_t>(s));
    dur.push_back(static_cast<std::int64_t>(d));
    return true;
  }
};

/// Adds one trace file's records to `c`, counting the lines skipped. Opened as lotus-tool opens
/// it (never blocking, a symbolic link not followed, only a regular file read, up to its size at
/// open); returns the reason it was not read, else an empty string.
std::string read_file(const std::string& path, columns& c, std::int64_t& skipped,
                      std::vector<char>& buf) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return errno == ELOOP ? "a symbolic link (not followed)" : std::strerror(errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return why;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return "not a regular file";
  }
  std::uint64_t left = static_cast<std::uint64_t>(st.st_size);
  std::size_t begin = 0;
  std::size_t end = 0;
  bool skipping = false;  // inside a line too long to keep
  std::string error;
  for (;;) {
    if (left > 0) {
      if (begin > 0) {
        std::memmove(buf.data(), buf.data() + begin, end - begin);
        end -= begin;
        begin = 0;
      }
      if (buf.size() - end < k_chunk) buf.resize(end + k_chunk);  // grows for a long line only
      const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(k_chunk, left));
      const ssize_t n = ::read(fd, buf.data() + end, want);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) error = std::string(std::strerror(errno)) + " (read stopped there)";
      if (n <= 0) {
        left = 0;
      } else {
        end += static_cast<std::size_t>(n);
        left -= static_cast<std::uint64_t>(n);
      }
    }
    while (begin < end) {
      const char* const lo = buf.data() + begin;
      const auto* nl = static_cast<const char*>(std::memchr(lo, '\n', end - begin));
      if (nl == nullptr) break;
      if (skipping) {
        skipping = false;
      } else if (!c.add_line(std::string_view(lo, static_cast<std::size_t>(nl - lo)))) {
        ++skipped;
      }
      begin += static_cast<std::size_t>(nl - lo) + 1;
    }
    if (left == 0) {
      if (begin < end && !skipping) ++skipped;  // the last line has no '\n'
      break;
    }
    if (end - begin > k_max_line) {  // counted once; its bytes up to the '\n' are dropped
      if (!skipping) ++skipped;
      skipping = true;
      begin = end;
    }
  }
  ::close(fd);
  return error;
}

/// `epoch` of each batch record in a file of group >= 0: the k-th occurrence of its index among
/// the records of its group and kind, in start order (ties in read order); -1 elsewhere.
std::vector<std::int64_t> epochs(const columns& c, const std::vector<std::int64_t>& rows,
                                 const std::vector<std::int64_t>& group) {
  struct key {
    std::int64_t group, idx, start;
    std::int32_t code;
    std::size_t row;
  };
  std::vector<std::int64_t> out(c.code.size(), -1);
  std::vector<key> keys;
  std::size_t r = 0;
  for (std::size_t f = 0; f < rows.size(); ++f) {
    const std::size_t r1 = r + static_cast<std::size_t>(rows[f]);
    for (; r < r1; ++r) {
      if (group[f] >= 0 && c.batch[r] >= 0) {
        keys.push_back({group[f], c.batch[r], c.start[r], c.code[r], r});
      }
    }
  }
  std::sort(keys.begin(), keys.end(), [](const key& a, const key& b) {
    return std::tie(a.group, a.code, a.idx, a.start, a.row) <
           std::tie(b.group, b.code, b.idx, b.start, b.row);
  });
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const bool same = i > 0 && keys[i].group == keys[i - 1].group &&
                      keys[i].code == keys[i - 1].code && keys[i].idx == keys[i - 1].idx;
    out[keys[i].row] = same ? out[keys[i - 1].row] + 1 : 0;
  }
  return out;
}

/// A column as a bytearray (numpy.frombuffer makes a writable array of it without a copy);
/// the vector is freed.
template <class T>
py::object column_bytes(std::vector<T>& v) {
  PyObject* b = PyByteArray_FromStringAndSize(reinterpret_cast<const char*>(v.data()),
                                              static_cast<Py_ssize_t>(v.size() * sizeof(T)));
  if (b == nullptr) throw py::error_already_set();
  std::vector<T>().swap(v);
  return py::reinterpret_steal<py::object>(b);
}

/// lotus._lotus._read_traces(paths, groups): the files' records in file then line order.
py::tuple read_traces(const std::vector<std::string>& paths,
                      const std::vector<std::int64_t>& group) {
  if (group.size() != paths.size()) throw py::value_error("_read_traces: one group per path");
  columns c;
  std::vector<std::int64_t> rows(paths.size(), 0);
  std::vector<std::int64_t> skipped(paths.size(), 0);
  std::vector<std::string> errors(paths.size());
  std::vector<std::int64_t> epoch;
  {
    py::gil_scoped_release unlocked;
    std::vector<char> buf;
    for (std::size_t f = 0; f < paths.size(); ++f) {
      const std::size_t before = c.code.size();
      errors[f] = read_file(paths[f], c, skipped[f], buf);
      rows[f] = static_cast<std::int64_t>(c.code.size() - before);
    }
    epoch = epochs(c, rows, group);
  }
  py::list names;
  for (const std::string& n : c.names) {
    PyObject* s =
        PyUnicode_DecodeUTF8(n.data(), static_cast<Py_ssize_t>(n.size()), "surrogateescape");
    if (s == nullptr) throw py::error_already_set();
    names.append(py::reinterpret_steal<py::object>(s));
  }
  py::list why;
  for (const std::string& e : errors) {
    why.append(e.empty() ? py::object(py::none()) : py::object(py::str(e)));
  }
  return py::make_tuple(names, column_bytes(c.code), column_bytes(c.batch), column_bytes(epoch),
                        column_bytes(c.start), column_bytes(c.dur), column_bytes(rows),
                        column_bytes(skipped), why);
}

}  // namespace frame_reader

}  // namespace

namespace lotus_python {
void add_model(py::module_& m);  // _lotus_model.cpp: lotus-tool's DataLoader model, for autotune
}  // namespace lotus_python

PYBIND11_MODULE(_lotus, m) {
  m.doc() = "lotus runtime (LotusTrace/LotusMap) for Python; use the `lotus` package";

  if (PyType_Ready(&scope_type) < 0 || PyType_Ready(&map_region_type) < 0) {
    throw py::error_already_set();
  }
  Py_INCREF(&scope_type);
  m.add_object("scope", reinterpret_cast<PyObject*>(&scope_type));
  Py_INCREF(&map_region_type);
  m.add_object("map_region", reinterpret_cast<PyObject*>(&map_region_type));
  if (PyModule_AddFunctions(m.ptr(), module_methods) < 0) throw py::error_already_set();

  m.attr("VERSION") = LOTUS_VERSION_STRING;
  lotus_python::add_model(m);
  m.attr("BATCH_PREPROCESSED") = static_cast<int>(k_preprocessed);
  m.attr("BATCH_WAIT") = static_cast<int>(k_wait);
  m.attr("BATCH_WAIT_MARKER") = static_cast<int>(k_wait_marker);
  m.attr("BATCH_QUEUED") = static_cast<int>(k_queued);
  m.attr("BATCH_CONSUMED") = static_cast<int>(k_consumed);

  m.def(
      "nvtx_compiled", [] { return lotus::detail::nvtx_compiled(); },
      "Whether this build pushes NVTX ranges when asked (LOTUS_NVTX / configure(nvtx=True)).");
  m.def("_flush_on_sigterm", &flush_on_sigterm,
        "In a DataLoader worker: flush lotus when SIGTERM arrives, then run the previous handler.");
  m.def("_set_decorator_factory", [](py::object f) {
    Py_XDECREF(g_decorate);
    g_decorate = f.release().ptr();
  });

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
  m.def("_read_traces", &frame_reader::read_traces, py::arg("paths"), py::arg("groups"),
        "lotus.frame's reader: the records of trace files (paths: bytes) by lotus-tool's rules, "
        "as (names, code int32, batch int64, epoch int64, start int64, dur int64, rows per file, "
        "skipped lines per file, why each file was not read or None); the column arrays are "
        "bytearrays, batch and epoch -1 where NA. Epochs are counted per group (a file of group "
        "-1: none).");

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
