"""The dispatcher's registrations, refused to a solution: a kernel of its own for one of torch's operators (or a
fallback for a whole dispatch key) would run for the reference and the comparison too.

The guard's record of `torch.library`'s bookkeeping sees a kernel registered through `Library.impl`; the handle
underneath (`torch._C._dispatch_library(...)`, `Library(...).m`, or a handle torch made for itself, such as the Meta
registrations') registers past it. So the handle's class itself is wrapped, once per worker and before any solution
loads: while a solution is loaded (the introspection watch armed), registering a kernel for an operator that existed
before it, for any key but Meta (torch's compiler registers those lazily), or a fallback, raises PermissionError and
is noted as the solution's route. Its own operators (a custom op it defines) stay its to implement. The guard records
the wrapped methods (`GUARDED_CLASSES`), so putting the originals back is a patch too."""

from __future__ import annotations

import functools

import torch

from opgen.grading.beside_solution.introspection import Watch

# the handle methods that register a kernel for an operator (name, dispatch key, ...), and those that register one
# for every operator of a key
_KERNEL_METHODS = ("impl", "impl_t_t", "impl_with_aoti_compile")
_FALLBACK_METHODS = ("fallback", "fallback_fallthrough", "register_ad_inplace_or_view_fallback")
_LAZY_KEYS = frozenset({"Meta"})

_protected = False


def protect(watch: Watch) -> None:
    """Wrap the dispatcher handle's registering methods (once per process)."""
    global _protected
    if _protected:
        return
    handle_type = getattr(torch._C, "_DispatchModule", None)
    factory = getattr(torch._C, "_dispatch_library", None)
    if handle_type is None or factory is None:
        return
    existing = {name.split(".")[0] for name in torch._C._dispatch_get_all_op_names()}
    bases = {name.partition("::")[2] for name in existing}
    namespaces: dict[int, str] = {}   # a handle made since, by its id: the namespace it registers in

    @functools.wraps(factory)
    def made(kind, namespace, *rest):
        handle = factory(kind, namespace, *rest)
        namespaces[id(handle)] = namespace
        return handle

    def refuse(what: str) -> None:
        if watch.found is None:
            watch.found = f"the solution's code registered {what}, which the reference would run"
        raise PermissionError(f"opgen's grader refuses {what} to a solution")

    def kernel_method(original):
        @functools.wraps(original)
        def method(self, name, key="", *rest, **options):
            key = options.pop("dispatch", key)
            if watch.solution_file is not None and str(key) not in _LAZY_KEYS:
                operator = str(name).split(".")[0]
                namespace = namespaces.get(id(self))
                if "::" in operator:
                    taken = operator in existing
                elif namespace is not None:
                    taken = f"{namespace}::{operator}" in existing
                else:   # a handle torch made for itself: any namespace
                    taken = operator in bases
                if taken:
                    refuse(f"a kernel for torch's operator {operator} ({key or 'every key'})")
            return original(self, name, key, *rest, **options)
        return method

    def fallback_method(original):
        @functools.wraps(original)
        def method(self, *args, **options):
            if watch.solution_file is not None:
                refuse("a fallback kernel for a dispatch key")
            return original(self, *args, **options)
        return method

    for name in _KERNEL_METHODS:
        if hasattr(handle_type, name):
            setattr(handle_type, name, kernel_method(getattr(handle_type, name)))
    for name in _FALLBACK_METHODS:
        if hasattr(handle_type, name):
            setattr(handle_type, name, fallback_method(getattr(handle_type, name)))
    torch._C._dispatch_library = made
    _protected = True
