"""The walk over ptxforge's public names that the docstring and API-reference tests share.

The walk covers every module of the package whose dotted path has no part starting with ``_``
(``__init__`` aside), every name of a module's ``__all__`` (or, without one, every name not starting
with ``_`` that the module defines itself), and for every class the public methods, properties,
class and static methods it defines or inherits from a class of ptxforge -- so the instruction
methods that ``KernelBuilder`` takes from its per-family mixins are checked as KernelBuilder's
(each inherited member is reported once, under the first class that shows it).

A method that overrides a documented method of a ptxforge base class counts as documented (the API
reference shows the inherited text). Generated text does not count: the ``Name(field, ...)``
signature that ``dataclasses`` and ``NamedTuple`` write into an undocumented class, or the
docstring a class inherits from ``Exception`` or ``Enum``.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import inspect
import pkgutil

import ptxforge

PACKAGE = "ptxforge"


def public_modules():
    """The importable public modules of the package, sorted by dotted name."""
    names = [PACKAGE]
    for info in pkgutil.walk_packages(ptxforge.__path__, PACKAGE + "."):
        if any(part.startswith("_") for part in info.name.split(".")[1:]):
            continue
        names.append(info.name)
    return [importlib.import_module(n) for n in sorted(names)]


def _ours(obj) -> bool:
    mod = getattr(obj, "__module__", None) or ""
    return mod == PACKAGE or mod.startswith(PACKAGE + ".")


def _own_doc(obj) -> str:
    doc = getattr(obj, "__doc__", None)
    return doc.strip() if isinstance(doc, str) else ""


def _generated_class_doc(cls, doc: str) -> bool:
    """True when `doc` is text Python wrote for `cls`, not a description of it."""
    if not doc:
        return True
    if "__doc__" not in cls.__dict__:
        return True                                   # inherited from a base (Exception, Enum, ...)
    if (dataclasses.is_dataclass(cls) or hasattr(cls, "_fields")) and doc.startswith(cls.__name__ + "("):
        return True                                   # the signature a dataclass / NamedTuple writes
    return False


def _function(member):
    """The function behind a class member, or None for data (fields, constants, enum members)."""
    if isinstance(member, (staticmethod, classmethod)):
        return member.__func__
    if isinstance(member, property):
        return member.fget
    if hasattr(member, "func") and hasattr(member, "attrname"):   # functools.cached_property
        return member.func
    if inspect.isfunction(member):
        return member
    return None


def _doc_of(member) -> str:
    """The docstring of a class member: a property's own (given with ``doc=`` or taken from its
    getter), or that of the function behind it."""
    if isinstance(member, property) or (hasattr(member, "func") and hasattr(member, "attrname")):
        return _own_doc(member)
    fn = _function(member)
    return _own_doc(fn) if fn is not None else ""


def _member_doc(cls, name):
    """The docstring of `cls.name`, its own or that of the same member on a ptxforge base class."""
    for base in cls.__mro__:
        if not _ours(base) or name not in base.__dict__:
            continue
        doc = _doc_of(base.__dict__[name])
        if doc:
            return doc
    return ""


def class_offenders(cls, where, seen):
    """Missing docstrings of `cls` and of its members; `seen` holds the classes and the
    (defining class, member) pairs already reported, so an inherited member is listed once."""
    out = []
    if not _ours(cls) or cls in seen:
        return out
    seen.add(cls)
    if _generated_class_doc(cls, _own_doc(cls)):
        out.append(f"{where} (class)")
    members = {}
    for base in reversed(cls.__mro__):
        if not _ours(base):
            continue
        for name, member in base.__dict__.items():
            if name.startswith("_") or _function(member) is None:
                continue
            if issubclass(cls, enum.Enum) and not isinstance(member, (property, staticmethod, classmethod)) \
                    and not inspect.isfunction(member):
                continue
            members[name] = base
    for name in sorted(members):
        if (members[name], name) in seen:
            continue
        seen.add((members[name], name))
        if not _member_doc(cls, name):
            fn = _function(members[name].__dict__[name])
            fn = getattr(fn, "__wrapped__", fn)          # KernelBuilder wraps its mixins' methods
            out.append(f"{where}.{name} (defined in {fn.__module__}.{fn.__qualname__})")
    return out


def missing_docstrings() -> list[str]:
    """Every public module, class, function, method and property of ptxforge without a docstring."""
    out, seen_classes, seen_funcs = [], set(), set()
    for mod in public_modules():
        if not _own_doc(mod):
            out.append(f"{mod.__name__} (module)")
        if hasattr(mod, "__all__"):
            names = list(mod.__all__)
        else:
            names = [n for n, v in vars(mod).items()
                     if not n.startswith("_") and getattr(v, "__module__", None) == mod.__name__]
        for name in names:
            obj = getattr(mod, name)
            where = f"{mod.__name__}.{name}"
            if inspect.isclass(obj):
                out.extend(class_offenders(obj, where, seen_classes))
            elif inspect.isfunction(obj) and _ours(obj) and obj not in seen_funcs:
                seen_funcs.add(obj)
                if not _own_doc(obj):
                    out.append(f"{where} (function)")
    return out
