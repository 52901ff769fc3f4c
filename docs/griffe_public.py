"""A Griffe extension for the API reference: a re-export (`from ._x import y as y`) of a module that defines no
`__all__` is public.

clashx's `__init__.py` files re-export their public names with redundant aliases (STYLE.md, item 1); Griffe
counts imported names as private unless `__all__` lists them.  Where a module has `__all__`, it alone decides
(this extension leaves such modules alone), so the reference shows exactly `__all__` once it exists.
"""

from __future__ import annotations

import ast
from typing import Any

import griffe


class RedundantAliasesArePublic(griffe.Extension):
    def __init__(self) -> None:
        self.aliases: list[griffe.Alias] = []

    def on_alias_instance(self, *, node: ast.AST | griffe.ObjectNode, alias: griffe.Alias, **kwargs: Any) -> None:
        if isinstance(node, ast.ImportFrom) and any(n.asname == n.name == alias.name for n in node.names):
            self.aliases.append(alias)

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        for alias in self.aliases:
            if alias.parent is not None and not alias.parent.exports:
                alias.public = True
