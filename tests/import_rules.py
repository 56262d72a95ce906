"""No reach-ins: four rules on the project's imports, read from the source (AST), as an
import-linter contract type.

``lint-imports`` (``tox -e lint``) checks the contract ``type = "reach_ins"`` of
``[tool.importlinter]`` (pyproject.toml) with it; ``tests/test_layers.py`` shows that each rule
breaks on a planted violation. The rules, for every module of the covered packages:

``import loop``
    no cycle of module-level imports (imports a module runs when it is first imported, class
    bodies included; ``if TYPE_CHECKING:`` blocks and function bodies excluded) passes through
    it; each strongly connected group of modules is reported once, as its shortest loop through
    its first covered module. import-linter's graph cannot tell a module-level import from one
    in a function, so the loops are found here (Tarjan's strongly connected components).
``private name``
    it imports no ``_private`` name (``from m import _x``, ``m._x``) of another module, and no
    private module outside the package that holds it (``a._b`` from ``a`` and below only, as
    import-linter's ``private_modules`` contract): what other modules use is public, with a
    docstring.
``patching``
    it assigns, deletes or ``setattr``\\ s no attribute of a project module it imported: a module
    is changed by its own code, never swapped from outside at run time.
``local import``
    it imports project modules at module level only; an import in a function body is allowed
    where an optional dependency (or the command line's start-up, which must not import torch)
    requires it, and only as listed in the contract's ``allowed_local_imports``
    (``importer -> imported``, each with its reason in a comment beside it).

The project's modules are those of import-linter's root packages; the covered ones are those
under the contract's ``packages`` minus those under its ``excluded``: one list in one place.
A known finding that waits for another change may be listed in the contract's ``ignore`` as
``"rule: module: what"`` (:meth:`Finding.key`, no line number); an allowance or an ignore that
matches nothing any more breaks the contract too, so both lists only shrink.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any

RULES = ("import loop", "private name", "patching", "local import")


@dataclass(frozen=True)
class Finding:
    """One breach of a rule: where (module and line) and what."""

    rule: str
    module: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.module}:{self.line}: {self.text}"

    def key(self) -> str:
        """``rule: module: what``, without the line: how the contract's ``ignore`` names it."""
        return f"{self.rule}: {self.module}: {self.text}"


@dataclass
class ModuleImports:
    """What one module imports and does to imported modules, read from its source."""

    name: str
    is_package: bool
    # (target module, line) of the imports run when the module is imported
    module_level: list[tuple[str, int]] = field(default_factory=list)
    # (target module, line) of the imports in function bodies
    local: list[tuple[str, int]] = field(default_factory=list)
    # (module, private name, line): `from module import _name` or `module._name`
    private_names: list[tuple[str, str, int]] = field(default_factory=list)
    # (private module, line): imports of a module with a private component
    private_modules: list[tuple[str, int]] = field(default_factory=list)
    # (module, attribute, line): assignments to attributes of imported project modules
    patches: list[tuple[str, str, int]] = field(default_factory=list)


def is_private(name: str) -> bool:
    """A private name: one leading underscore, not a dunder (``__init__``, ``__all__``)."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def find_modules(root_packages: Iterable[str]) -> dict[str, tuple[Path, bool]]:
    """Every module of the root packages: name -> (source file, is a package)."""
    modules: dict[str, tuple[Path, bool]] = {}
    for package in root_packages:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise ValueError(f"root package {package!r} is not importable as a package")
        folder = Path(next(iter(spec.submodule_search_locations)))
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if any(not part.isidentifier() for part in parts):
                continue  # not importable (a data folder, a script with a dash)
            is_package = parts[-1] == "__init__"
            name = ".".join((package, *(parts[:-1] if is_package else parts)))
            modules[name] = (path, is_package)
    return modules


def _absolute(module: str, is_package: bool, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Reader(ast.NodeVisitor):
    def __init__(self, result: ModuleImports, modules: dict[str, tuple[Path, bool]]) -> None:
        self.result = result
        self.modules = modules
        self.depth = 0  # function bodies entered
        self.type_checking = 0
        # local names bound to project modules (anywhere in the file: an approximation that
        # errs towards finding a reach-in)
        self.module_names: dict[str, str] = {}

    def _record(self, target: str, line: int) -> None:
        if self.type_checking:
            return
        imports = self.result.local if self.depth else self.result.module_level
        if (target, line) not in imports:  # `from m import a, b`: one import of m
            imports.append((target, line))

    def _check_private_module(self, target: str, line: int) -> None:
        parts = target.split(".")
        for i, part in enumerate(parts):
            if is_private(part):
                parent = ".".join(parts[:i])
                found = (".".join(parts[: i + 1]), line)
                if (
                    not (self.result.name == parent or self.result.name.startswith(parent + "."))
                    and found not in self.result.private_modules
                ):
                    self.result.private_modules.append(found)
                return

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_Lambda = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            self.type_checking += 1
            for statement in node.body:
                self.visit(statement)
            self.type_checking -= 1
            for statement in node.orelse:
                self.visit(statement)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] not in self._roots():
                continue
            target = self._known(alias.name)
            self._record(target, node.lineno)
            self._check_private_module(alias.name, node.lineno)
            if alias.asname:
                self.module_names[alias.asname] = alias.name
            else:
                self.module_names[alias.name.split(".")[0]] = alias.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        source = _absolute(self.result.name, self.result.is_package, node.level, node.module)
        if source.split(".")[0] not in self._roots():
            return
        for alias in node.names:
            submodule = f"{source}.{alias.name}"
            if submodule in self.modules:
                self._record(submodule, node.lineno)
                self._check_private_module(submodule, node.lineno)
                self.module_names[alias.asname or alias.name] = submodule
                continue
            self._record(self._known(source), node.lineno)
            self._check_private_module(source, node.lineno)
            if is_private(alias.name) and source != self.result.name:
                self.result.private_names.append((source, alias.name, node.lineno))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        module = self._module_of(node.value)
        if module is not None and module != self.result.name and is_private(node.attr):
            if f"{module}.{node.attr}" not in self.modules:
                self.result.private_names.append((module, node.attr, node.lineno))
        if module is not None and isinstance(node.ctx, ast.Store | ast.Del):
            self.result.patches.append((module, node.attr, node.lineno))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr") and node.args:
            module = self._module_of(node.args[0])
            if module is not None:
                attribute = node.args[1] if len(node.args) > 1 else None
                name = attribute.value if isinstance(attribute, ast.Constant) else "<computed>"
                self.result.patches.append((module, str(name), node.lineno))
        self.generic_visit(node)

    def _module_of(self, node: ast.expr) -> str | None:
        """The project module an expression (``name`` or ``name.sub``) stands for, if any."""
        if isinstance(node, ast.Name):
            return self.module_names.get(node.id)
        if isinstance(node, ast.Attribute):
            outer = self._module_of(node.value)
            if outer is not None and f"{outer}.{node.attr}" in self.modules:
                return f"{outer}.{node.attr}"
        return None

    def _known(self, name: str) -> str:
        """The longest prefix of ``name`` that is a module of the project."""
        parts = name.split(".")
        while parts and ".".join(parts) not in self.modules:
            parts.pop()
        return ".".join(parts) or name

    def _roots(self) -> set[str]:
        return {name.split(".")[0] for name in self.modules}


def read_modules(
    modules: dict[str, tuple[Path, bool]], names: Iterable[str] | None = None
) -> dict[str, ModuleImports]:
    """Read the imports of the modules ``names`` (default: every module) from their source;
    ``modules`` tells which imports are of the project."""
    read = {}
    for name in modules if names is None else names:
        path, is_package = modules[name]
        result = ModuleImports(name, is_package)
        _Reader(result, modules).visit(ast.parse(path.read_text(), filename=str(path)))
        read[name] = result
    return read


def module_level_cycles(read: dict[str, ModuleImports]) -> list[list[str]]:
    """The import loops of the module-level import graph: :func:`strongly_connected` on it."""
    return strongly_connected(
        {name: {t for t, _ in m.module_level if t in read} for name, m in read.items()}
    )


def strongly_connected(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of a directed graph (each node with the nodes it points
    to) of more than one node, or of a node pointing to itself: each is a loop. Each component
    sorted, the components in sorted order (Tarjan's algorithm, iterative so that a long chain
    of imports does not reach Python's recursion limit)."""
    graph = {node: sorted(targets) for node, targets in edges.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph.get(child, ()))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph.get(node, ()):
                    components.append(sorted(component))
    return sorted(components)


def shortest_loop(read: dict[str, ModuleImports], start: str, component: set[str]) -> list[str]:
    """The shortest chain of module-level imports from ``start`` back to itself inside its
    strongly connected ``component`` (breadth first): ``[start, ..., start]``."""
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for target in sorted({t for t, _ in read[module].module_level if t in component}):
                if target == start:
                    chain = [module]
                    while chain[-1] != start:
                        chain.append(parents[chain[-1]])
                    return [*reversed(chain), start]
                if target not in parents:
                    parents[target] = module
                    following.append(target)
        frontier = following
    raise ValueError(f"{start} is in no loop of {sorted(component)}")


def covered(module: str, packages: Iterable[str], excluded: Iterable[str] = ()) -> bool:
    """Whether ``module`` is under one of ``packages`` and under none of ``excluded``."""

    def under(prefixes: Iterable[str]) -> bool:
        return any(module == p or module.startswith(p + ".") for p in prefixes)

    return under(packages) and not under(excluded)


def module_findings(module: ModuleImports, allowed: set[tuple[str, str]]) -> list[Finding]:
    """One module's breaches of the private-name, patching and local-import rules (``allowed``:
    the listed local imports, ``(importer, imported)``)."""
    name = module.name
    found: list[Finding] = []
    for source, private, line in module.private_names:
        found.append(Finding("private name", name, line, f"{source}.{private}"))
    for target, line in module.private_modules:
        found.append(Finding("private name", name, line, f"private module {target}"))
    for target, attribute, line in module.patches:
        found.append(Finding("patching", name, line, f"{target}.{attribute} changed from {name}"))
    for target, line in module.local:
        if (name, target) not in allowed:
            found.append(Finding("local import", name, line, f"{name} -> {target} in a function"))
    return found


def findings(
    read: dict[str, ModuleImports],
    packages: Iterable[str],
    excluded: Iterable[str] = (),
    allowed_local_imports: Iterable[tuple[str, str]] = (),
) -> list[Finding]:
    """Every breach of the four rules by a covered module, in rule and module order."""
    packages, excluded = tuple(packages), tuple(excluded)
    allowed = set(allowed_local_imports)
    found: list[Finding] = []
    for component in module_level_cycles(read):
        inside = [m for m in component if covered(m, packages, excluded)]
        if inside:
            loop = shortest_loop(read, inside[0], set(component))
            # the line of the loop's first import, in its first covered module
            line = next(n for t, n in read[loop[0]].module_level if t == loop[1])
            found.append(Finding("import loop", loop[0], line, " -> ".join(loop)))
    for name in sorted(read):
        if not covered(name, packages, excluded):
            continue
        found += module_findings(read[name], allowed)
    return sorted(found, key=lambda f: (RULES.index(f.rule), f.module, f.line, f.text))


def unused_allowances(
    read: dict[str, ModuleImports], allowed_local_imports: Iterable[tuple[str, str]]
) -> list[str]:
    """Allowed local imports that no module makes any more (an allowlist only shrinks)."""
    made = {(name, target) for name, m in read.items() for target, _ in m.local}
    return [f"{a} -> {b}" for a, b in allowed_local_imports if (a, b) not in made]


def parse_allowance(text: str) -> tuple[str, str]:
    """``"importer -> imported"`` as a pair."""
    importer, arrow, imported = text.partition("->")
    if not arrow or not importer.strip() or not imported.strip():
        raise ValueError(f"an allowed local import reads 'importer -> imported', not {text!r}")
    return importer.strip(), imported.strip()


try:  # the contract type for lint-imports; the functions above need no import-linter
    from importlinter.application import output
    from importlinter.domain import fields
    from importlinter.domain.contract import Contract
    from importlinter.domain.contract import ContractCheck
except ImportError:  # pragma: no cover - import-linter is in the extras test and lint
    pass
else:

    class ReachInsContract(Contract):
        """No import loops, private names, patching or unlisted local imports (module doc)."""

        type_name = "reach_ins"

        packages = fields.ListField(subfield=fields.StringField())
        excluded = fields.ListField(subfield=fields.StringField(), required=False)
        allowed_local_imports = fields.ListField(subfield=fields.StringField(), required=False)
        ignore = fields.ListField(subfield=fields.StringField(), required=False)

        def _strings(self, name: str) -> list[str]:
            """A list option's value (import-linter fills the fields in at run time)."""
            return [str(item) for item in getattr(self, name) or ()]

        def check(self, graph: Any, verbose: bool) -> ContractCheck:
            roots = sorted({m.split(".")[0] for m in graph.modules})
            read = read_modules(find_modules(roots))
            allowed = [parse_allowance(a) for a in self._strings("allowed_local_imports")]
            ignored = set(self._strings("ignore"))
            found = findings(read, self._strings("packages"), self._strings("excluded"), allowed)
            lines = [str(f) for f in found if f.key() not in ignored]
            lines += [
                f"allowed local import no longer made (remove it from the list): {s}"
                for s in unused_allowances(read, allowed)
            ]
            lines += [
                f"ignored finding no longer found (remove it from the list): {key}"
                for key in sorted(ignored - {f.key() for f in found})
            ]
            return ContractCheck(kept=not lines, warnings=[], metadata={"lines": lines})

        def render_broken_contract(self, check: ContractCheck) -> None:
            for line in check.metadata["lines"]:
                output.print_error(line, bold=False)
            output.new_line()


def main(argv: list[str] | None = None) -> int:
    """Print every finding of the rules for the given packages (default: all root packages)
    and counts per rule: ``python -m tests.import_rules [PACKAGE ...]``."""
    args = sys.argv[1:] if argv is None else argv
    roots = ["problems", "testbed", "theory_checks", "testbed_app", "reports", "results_format"]
    read = read_modules(find_modules(roots))
    found = findings(read, args or roots)
    for finding in found:
        print(finding)
    for rule in RULES:
        print(f"{rule}: {sum(f.rule == rule for f in found)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
