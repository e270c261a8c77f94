# SPDX-License-Identifier: MIT
"""How a loader family's adapter is installed: shape checks by behaviour, patches, warnings.

An adapter module (``dataloader.py``, ``stateful.py``, ``nodes.py``, ``torchvision.py``) lists its
targets: ``(group, key, owner, attribute, replacement, params)``. ``params`` are the parameters the
replacement relies on, in order; ``"a|b"`` accepts either name (a parameter renamed upstream that
lotus passes by position), a final ``"..."`` lets the function take more (passed through as they
came). A group is installed whole or not at all: a wrapper whose partner is missing would record
wrong indices. Where a library differs from what an adapter relies on, one warning per group names
the version and the function, and that group stays untraced.
"""

import inspect as _inspect
import sys as _sys
import types as _types
import warnings as _warnings


class State:
    """Process-wide tracing state shared by every family."""

    trace_all = False  # True: trace everything; False: only objects with Lotus's keywords
    installed = False


state = State()

_originals = {}  # key -> the function a replacement wraps
_warned = {}


def original(key):
    return _originals[key]


def gate(obj):
    """Lotus's condition for tracing `obj` (a dataset): everything, or a `log_file` set on it."""
    return state.trace_all or bool(getattr(obj, "log_file", None))


def versions():
    from . import libraries  # the package's: torch and each family's library
    out = []
    for mod in libraries():
        m = _sys.modules.get(mod)
        if m is not None:
            out.append(f"{mod} {getattr(m, '__version__', '?')}")
    return ", ".join(out)


def unsupported(key, what, stacklevel=3):
    """Warn once per key that a part of a library's private API is not what lotus knows."""
    if _warned.get(key):
        return
    _warned[key] = True
    _warnings.warn(f"lotus.torch does not support this version ({versions()}): {what}",
                   RuntimeWarning, stacklevel=stacklevel)


def warned(key):
    return bool(_warned.get(key))


def lookup(owner, attr):
    """(the function `owner.attr` resolves to, whether `owner` defines it itself), or None."""
    if isinstance(owner, type):
        for klass in owner.__mro__:
            if attr in klass.__dict__:
                return klass.__dict__[attr], klass is owner
        return None
    return (owner.__dict__[attr], True) if attr in owner.__dict__ else None


def shape_error(found, params):
    """Why `found` is not the function a wrapper expects, or None when it is."""
    if found is None:
        return "missing"
    fn = found[0]
    if isinstance(fn, (staticmethod, classmethod)):
        fn = fn.__func__
    if not callable(fn):
        return "not a function"
    try:
        sig = _inspect.signature(fn)
    except (TypeError, ValueError):
        return "its signature cannot be read"
    have = [("*" if p.kind is p.VAR_POSITIONAL else "") + name
            for name, p in sig.parameters.items()]
    # "..." ends a list whose function takes more (passed through); otherwise a further parameter
    # without a default is a call lotus's wrapper does not make.
    rest = params[-1] == "..."
    params = params[:-1] if rest else params
    extra_required = [p for p in list(sig.parameters.values())[len(params):]
                      if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY,
                                                             p.POSITIONAL_OR_KEYWORD)]
    same = all(h in w.split("|") for w, h in zip(params, have))
    if len(have) < len(params) or not same or (extra_required and not rest):
        return f"parameters ({', '.join(have)}), expected ({', '.join(params)}, ...)"
    return None


class InstanceMethod:
    """A method that instances see as lotus's `replacement` and the class itself as `original`.

    TorchScript compiles a class (``torch.jit.script(transforms.Compose([...]))``) from what the
    class's attributes are: through this descriptor, the library's own functions, source and file,
    so scripting succeeds or fails exactly as without lotus. Calls on instances (``compose(img)``,
    ``Compose(...)``, ``super().__call__``) find the descriptor in the type and get the replacement.
    """

    __slots__ = ("replacement", "original")

    def __init__(self, replacement, original):
        self.replacement = replacement
        self.original = original

    def __get__(self, obj, owner=None):
        if obj is None:
            return self.original
        return _types.MethodType(self.replacement, obj)

    def __call__(self, *args, **kwargs):  # Compose.__dict__["__call__"](compose, img)
        return self.replacement(*args, **kwargs)


def install(targets, group_records, scriptable=(), make=None):
    """Patch `targets` of one family; returns [(owner, attr, original or None)] to undo.

    `make(key, fn)` may build a replacement at install time (None: use the listed one)."""
    bad = {}
    for group, key, owner, attr, _, params in targets:
        why = shape_error(lookup(owner, attr), params)
        if why is not None and group not in bad:
            bad[group] = f"{getattr(owner, '__name__', owner)}.{attr}: {why}"
    for group, why in bad.items():
        unsupported("shape:" + group, f"{why}; its {group_records[group]} are not recorded",
                    stacklevel=5)
    patches = []
    for group, key, owner, attr, replacement, _ in targets:
        if group in bad:
            continue
        fn, own = lookup(owner, attr)
        _originals[key] = fn
        patches.append((owner, attr, fn if own else None))
        if make is not None:
            replacement = make(key, fn) or replacement
        if isinstance(replacement, _types.FunctionType) and replacement.__name__ != attr:
            # A bound method pickles as getattr(obj, its function's __name__): under the
            # library's name (`ds.__getitem__` handed to a spawn worker, as torchdata.nodes'
            # ParallelMapper does) it unpickles in any process, traced or not.
            replacement.__name__ = attr
        if group in scriptable and isinstance(fn, _types.FunctionType):
            replacement = InstanceMethod(replacement, fn)
        setattr(owner, attr, replacement)
    return patches


def uninstall(patches):
    for owner, attr, orig in reversed(patches):
        if orig is None:  # inherited: remove ours, the base class's shows again
            delattr(owner, attr)
        else:
            setattr(owner, attr, orig)


def hide_frames(e, filename):
    """Takes the frames of `filename` (a lotus module's code) out of `e`'s traceback; the caller
    re-raises with a bare ``raise`` (which adds no frame): the traceback, and any text made of it
    (torch's "Original Traceback", torchdata's ExceptionWrapper), reads as without lotus."""
    tb, keep = e.__traceback__, []
    while tb is not None:
        if tb.tb_frame.f_code.co_filename != filename:
            keep.append(tb)
        tb = tb.tb_next
    for a, b in zip(keep, keep[1:] + [None]):
        a.tb_next = b
    e.__traceback__ = keep[0] if keep else None
