# SPDX-License-Identifier: MIT
"""torchvision: ``S<step>`` per Compose step, ``SLoader``/``STransform`` per DatasetFolder sample.

Lotus's keywords are accepted as its patched torchvision did: ``Compose(...,
log_transform_elapsed_time=path)`` and ``ImageFolder(..., log_file=path)`` trace that object (and
make ``path`` the process's trace prefix when none is set).
"""

import functools as _functools
import os as _os
import types as _types
import warnings as _warnings

import lotus as _lotus_pkg
from .. import _lotus
from . import _contract, _patch
from ._patch import gate as _gate, original as _original, state as _state

_now = _lotus._now
_record = _lotus._record
_op_enter = _lotus._op_enter
_op_leave = _lotus._op_leave
_nvtx_on = _lotus._nvtx_on
_nvtx_push = _lotus._nvtx_push
_nvtx_pop = _lotus._nvtx_pop
_compose = _lotus._compose
_folder_sample = _lotus._folder_sample

_prefix_warned = False

LIBRARY = "torchvision"  # installed when the program imports it (loaders/__init__.py), never before

GROUP_RECORDS = {
    "compose": "Compose step records",
    "compose_v2": "transforms.v2.Compose step records",
    "folder": "SLoader/STransform records",
}
SCRIPTABLE = ("compose", "compose_v2")  # classes TorchScript may be asked to compile


def use_prefix(path):
    """A Lotus keyword named a log file: it becomes the trace prefix if none is set yet."""
    global _prefix_warned
    try:
        wanted = _os.path.abspath(_os.fspath(path))
    except TypeError:
        raise TypeError("the Lotus log file must be a str or os.PathLike, not "
                        f"{type(path).__name__}") from None
    if not _lotus.tracing_enabled():
        _lotus_pkg.configure(**{**_lotus_pkg._last_options, "log_file": wanted})
        return
    current = _lotus_pkg._last_options.get("log_file") or _os.environ.get("LOTUS_LOG_FILE")
    if current and _os.path.abspath(current) != wanted and not _prefix_warned:
        _prefix_warned = True
        _warnings.warn(f"lotus writes one trace prefix per process: {current!r} is in use, "
                       f"{str(path)!r} is ignored", RuntimeWarning, stacklevel=3)


def _compose_init(self, transforms, log_transform_elapsed_time=None):
    _original("Compose.__init__")(self, transforms)
    self.log_transform_elapsed_time = log_transform_elapsed_time
    if log_transform_elapsed_time:
        use_prefix(log_transform_elapsed_time)


# A step whose name cannot be taken (a `func` or `__name__` that raises, a name that is no str or
# cannot be encoded, such as a lone surrogate from a file name that is not UTF-8) is recorded under
# this name and runs as without lotus (the C path of _lotus._compose uses the same one).
UNNAMED_STEP = "lotus_unnamed_step"


def _own_name(step):
    if isinstance(step, (_types.FunctionType, _types.BuiltinFunctionType)):
        return getattr(step, "__name__", None) or "function"
    if isinstance(step, _functools.partial):
        return _own_name(step.func)
    return type(step).__name__


def step_name(step):
    """A Compose step's record name: its class, or a plain function's own name (Lotus writes the
    class name; for a function that would be 'function'); UNNAMED_STEP when that cannot be taken.
    Never raises for an Exception (the step must run whatever its name)."""
    try:
        name = _own_name(step)
        if isinstance(name, str) and name:
            name.encode("utf-8")  # a lone surrogate: UnicodeEncodeError
            return name
    except Exception:
        pass
    return UNNAMED_STEP


def run_steps(steps, apply, x):
    """Apply `steps` in order (`apply(step, x)` -> x) and record each; Lotus writes the lines of one
    call together, after the last step (so a nested Compose's own lines come before its parent's);
    nothing is written when a step raises."""
    spans = []
    nvtx = _nvtx_on()
    t = _now()
    for step in steps:
        name = step_name(step)
        pushed = nvtx and _nvtx_push(name)
        if pushed:
            t = _now()
        token = _op_enter(name)
        try:
            x = apply(step, x)
        finally:
            end = _now()
            _op_leave(token)
            if pushed:
                _nvtx_pop()
        spans.append((name, t, end))
        t = _now()
    for name, start, end in spans:
        _record(name, start, end)
    return x


def _hide(e):
    """This module's frames out of `e`'s traceback: a step's exception reads as without lotus."""
    _patch.hide_frames(e, _THIS_FILE)


_THIS_FILE = _hide.__code__.co_filename


def _compose_call(self, img):
    try:
        if not (_state.trace_all or getattr(self, "log_transform_elapsed_time", None)):
            for step in self.transforms:
                img = step(img)
            return img
        # run_steps with step(img) applied, in C: one call a sample, not a dozen a step.
        return _compose(self.transforms, img)
    except BaseException as e:
        _hide(e)
        raise


def _v2_apply(step, state):
    inputs, unpack = state
    outputs = step(*inputs)
    return (outputs if unpack else (outputs,)), unpack


def _v2_compose_forward(self, *inputs):
    """transforms.v2.Compose.forward (torchvision 0.15+), traced step by step when tracing all."""
    unpack = len(inputs) > 1
    try:
        if not _state.trace_all:
            for step in self.transforms:
                outputs = step(*inputs)
                inputs = outputs if unpack else (outputs,)
            return outputs
        inputs, _ = run_steps(self.transforms, _v2_apply, (inputs, unpack))
        return inputs if unpack else inputs[0]
    except BaseException as e:
        _hide(e)
        raise


def _folder_init(self, *args, log_file=None, **kwargs):
    _original("DatasetFolder.__init__")(self, *args, **kwargs)
    self.log_file = log_file
    if log_file:
        use_prefix(log_file)


def _image_folder_init(self, *args, log_file=None, **kwargs):
    _original("ImageFolder.__init__")(self, *args, **kwargs)
    self.log_file = log_file
    if log_file:
        use_prefix(log_file)


def _folder_getitem(self, index):
    if not _gate(self):
        return _original("DatasetFolder.__getitem__")(self, index)
    path, target = self.samples[index]
    # SLoader around self.loader(path), STransform around self.transform (even without one),
    # recorded after both: after the Compose's lines, as Lotus writes them (NVTX ranges too).
    sample = _folder_sample(self.loader, path, self.transform)
    if self.target_transform is not None:
        target = self.target_transform(target)
    return sample, target


def targets():
    try:
        from torchvision import datasets, transforms
    except ImportError:  # torch without torchvision: the DataLoader records only
        return []
    out = [
        ("compose", "Compose.__init__", transforms.Compose, "__init__", _compose_init,
         ("self", "transforms")),
        ("compose", "Compose.__call__", transforms.Compose, "__call__", _compose_call,
         ("self", "img")),
        ("folder", "DatasetFolder.__init__", datasets.DatasetFolder, "__init__", _folder_init,
         ("self", "root", "...")),
        ("folder", "DatasetFolder.__getitem__", datasets.DatasetFolder, "__getitem__",
         _folder_getitem, ("self", "index")),
        ("folder", "ImageFolder.__init__", datasets.ImageFolder, "__init__", _image_folder_init,
         ("self", "root", "...")),
    ]
    try:
        from torchvision.transforms import v2
    except ImportError:  # torchvision before 0.15: no transforms.v2
        return out
    out.append(("compose_v2", "v2.Compose.forward", v2.Compose, "forward", _v2_compose_forward,
                ("self", "*inputs")))
    return out


def install():
    return _patch.install(targets(), GROUP_RECORDS, scriptable=SCRIPTABLE)


# Its records are checked within the DataLoader's run (its Samples go through a Compose).
FAMILY = _contract.Family("torchvision", install, order=10, library=LIBRARY)
