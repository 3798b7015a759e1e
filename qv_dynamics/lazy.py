"""A package whose public names are imported on first use (PEP 562 style), bound as an eager
``from .module import name`` in its ``__init__`` would bind them. Standard library only: importing the
package costs nothing until a name is used, so a node's console entry point (:mod:`qv_dynamics.ros.entry`)
handles signals before numpy, Pinocchio and rclpy are loaded."""
from __future__ import annotations

import importlib
import sys
import types


class LazyPackage(types.ModuleType):
    """The package module's class once :func:`make_lazy` ran. ``_LAZY`` (name -> relative module) lists the
    public names. A public name that is also a submodule's (``qv_dynamics.projection``: the function and its
    module) keeps naming the public object: the import system binding the submodule over it is ignored, as the
    eager ``__init__`` rebound it after importing the module."""

    def __getattr__(self, name: str):
        where = self.__dict__.get("_LAZY", {}).get(name)
        if where is None:  # a submodule read as an attribute (``qv_dynamics.sim``), as after an eager import
            full = f"{self.__name__}.{name}"
            try:
                return importlib.import_module(full)
            except ModuleNotFoundError as exc:
                if exc.name != full:
                    raise
                raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(where, self.__name__), name)
        types.ModuleType.__setattr__(self, name, value)  # once: later reads do not come here
        return value

    def __setattr__(self, name: str, value) -> None:
        if isinstance(value, types.ModuleType) and name in self.__dict__.get("_LAZY", {}):
            return
        types.ModuleType.__setattr__(self, name, value)

    def __dir__(self) -> list[str]:
        return sorted(set(self.__dict__) | set(self.__dict__.get("_LAZY", {})))


def make_lazy(module_name: str) -> None:
    """Turn the (already executing) package ``module_name`` into a :class:`LazyPackage`."""
    sys.modules[module_name].__class__ = LazyPackage
