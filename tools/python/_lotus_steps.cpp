// lotus — lotus._lotus: torchvision's per-sample spans and the timed worker_init_fn
// SPDX-License-Identifier: MIT
#include <time.h>

#include <cstdint>
#include <new>
#include <string_view>
#include <vector>

#include "_lotus.hpp"
#include "lotus/lotus.hpp"

namespace lotus_python {

namespace {

using lotus::detail::mode_tsc;

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

PyMethodDef step_methods[] = {
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

}  // namespace

void add_steps(py::module_& m) {
  if (PyModule_AddFunctions(m.ptr(), step_methods) < 0) throw py::error_already_set();
}

}  // namespace lotus_python
