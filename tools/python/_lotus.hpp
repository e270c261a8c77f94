// lotus — lotus._lotus: what the module's files share
// SPDX-License-Identifier: MIT
// The module is one file per concern: _lotus.cpp (the runtime, the module's table, configure),
// _lotus_scope.cpp (lotus.scope, lotus.map_region), _lotus_record.cpp (lotus.torch's record
// primitives), _lotus_steps.cpp (torchvision's per-sample spans, the timed worker_init_fn),
// _lotus_format.cpp (the trace reader of lotus.frame and lotus.loaders, lotus-tool's format/)
// and _lotus_model.cpp (lotus-tool's DataLoader model, for lotus.autotune).
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string_view>

namespace lotus_python {

namespace py = pybind11;

/// The UTF-8 view of a str (no copy for compact ASCII strings); false with a TypeError set.
inline bool name_view(PyObject* name, std::string_view& out, const char* what) {
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
inline bool u64_arg(PyObject* o, std::uint64_t& out, const char* what) {
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

void add_scope(py::module_& m);   // lotus.scope, lotus.map_region, the decorator factory
void add_record(py::module_& m);  // lotus.torch's record primitives and the BATCH_* kinds
void add_steps(py::module_& m);   // _compose, _folder_sample, _timed_init
void add_format(py::module_& m);  // _read_traces, _trace_files, _read_records, _batch_kind
void add_model(py::module_& m);   // _simulate_epoch, _predict_memory

}  // namespace lotus_python
