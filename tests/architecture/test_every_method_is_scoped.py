"""Every public method of a tenant repository names the organisation it reads or writes: it takes
the reader, or the organisation's id, or a row (or filter) that carries the organisation, or it is
one of the system reads in `server.kit.repository.SYSTEM_READS`, each with why. The list and the
code are compared both ways, so a new method cannot skip the organisation unnoticed and a fixed one
cannot linger in the list."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import typing
from collections.abc import Callable, Iterator
from typing import Any

import auth
import server
from server.kit.repository import SYSTEM_READS, Repository, TenantRepository

SCOPING_PARAMETERS = frozenset({"reader", "principal", "org_id"})


def _tenant_repositories() -> list[type[TenantRepository[Any]]]:
    for package in (server, auth):
        for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            importlib.import_module(module.name)

    def below(cls: type[Any]) -> Iterator[type[Any]]:
        subclass: type[Any]
        for subclass in cls.__subclasses__():
            yield subclass
            yield from below(subclass)

    found: set[type[TenantRepository[Any]]] = set(below(TenantRepository))
    return sorted(found, key=lambda cls: cls.__name__)


def _public_methods(cls: type) -> Iterator[tuple[str, Callable[..., Any]]]:
    for name, method in inspect.getmembers(cls, inspect.isfunction):
        if not name.startswith("_"):
            yield name, method


def _has_org_id(cls: Any) -> bool:
    if dataclasses.is_dataclass(cls) and isinstance(cls, type):
        return "org_id" in {field.name for field in dataclasses.fields(cls)}
    return "org_id" in getattr(cls, "model_fields", {})


def _carries_organisation(annotation: Any, row: type) -> bool:
    """A row or a filter that has its organisation in it (an `org_id` field), or a collection of
    them. A type variable is the repository's own row: a tenant table's row carries its
    organisation (the organisations table's row is one)."""
    if isinstance(annotation, typing.TypeVar):
        return _has_org_id(row) or getattr(row, "__tablename__", None) == "organizations"
    if _has_org_id(annotation):
        return True
    return any(_carries_organisation(argument, row) for argument in typing.get_args(annotation))


def _scoped(method: Callable[..., Any], row: type) -> bool:
    parameters = list(inspect.signature(method).parameters)[1:]
    if SCOPING_PARAMETERS & set(parameters):
        return True
    hints = typing.get_type_hints(method)
    return any(_carries_organisation(hints.get(name), row) for name in parameters)


def _unscoped() -> set[str]:
    found = set()
    for cls in _tenant_repositories():
        for name, method in _public_methods(cls):
            if not _scoped(method, cls.model):
                owner = method.__qualname__.split(".")[0]
                found.add(f"{owner}.{name}")
    return found


def test_every_public_method_of_a_tenant_repository_names_its_organisation() -> None:
    unscoped = _unscoped()
    unlisted = sorted(unscoped - set(SYSTEM_READS))
    assert unlisted == [], f"take the reader or org_id, or list as a system read with why: {unlisted}"


def test_the_system_reads_are_each_justified_and_still_unscoped() -> None:
    unscoped = _unscoped()
    stale = sorted(set(SYSTEM_READS) - unscoped)
    assert stale == [], f"no longer unscoped (or gone): take them out of SYSTEM_READS: {stale}"
    for name, why in SYSTEM_READS.items():
        assert len(why.split()) >= 5, f"{name}: say why it reads across organisations"


def test_the_generic_plumbing_is_not_public() -> None:
    """A bare statement of a tenant table is the start of a query, never a read a caller may make:
    the base class keeps it to its subclasses."""
    public = {name for name, _ in _public_methods(Repository)}
    assert "statement" not in public
    assert {"first", "all"}.isdisjoint(public)
