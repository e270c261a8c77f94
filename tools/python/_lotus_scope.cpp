// lotus — lotus._lotus: lotus.scope and lotus.map_region, written against the CPython C API
// SPDX-License-Identifier: MIT
// A `with lotus.scope("Op"):` costs an object allocation and two C calls; pybind11 dispatch
// (argument conversion, overload resolution) would triple that.
#include <new>
#include <string_view>

#include "_lotus.hpp"
#include "lotus/lotus.hpp"
#include "lotus/map_region.hpp"

namespace lotus_python {

namespace {

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

}  // namespace

void add_scope(py::module_& m) {
  if (PyType_Ready(&scope_type) < 0 || PyType_Ready(&map_region_type) < 0) {
    throw py::error_already_set();
  }
  Py_INCREF(&scope_type);
  m.add_object("scope", reinterpret_cast<PyObject*>(&scope_type));
  Py_INCREF(&map_region_type);
  m.add_object("map_region", reinterpret_cast<PyObject*>(&map_region_type));
  m.def("_set_decorator_factory", [](py::object f) {
    Py_XDECREF(g_decorate);
    g_decorate = f.release().ptr();
  });
}

}  // namespace lotus_python
