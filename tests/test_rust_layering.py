"""The Rust core's modules use each other without a cycle, and the binding has one gate
(issue 20).

The walk starts at ``rust/tokpipe-core/src/lib.rs`` and follows the ``mod`` declarations (with
their ``#[path]``), so it sees the module tree the compiler sees. In each module it collects
every path the code names: ``use`` trees, and paths in code that start at ``crate::``,
``super::``, ``self::`` or at a child module. A path through a re-export (``pub use``) is
followed to where the item is defined, so a facade module does not hide a dependency, and the
re-export itself counts as a use by the module that writes it. Code under ``#[cfg(test)]`` is
left out: tests may reach anywhere. Each module belongs to a unit (see :func:`unit`), and the
units' graph must have no cycle.

The binding (``rust/tokpipe-py``) releases the GIL only through ``gate.rs`` (which also
catches panics and maps errors) and makes Python errors only in ``errors.rs``.

Run this file directly to print the units' graph (``python3 tests/test_rust_layering.py``).
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

if __name__ == "__main__":  # run as a script (it prints the graph): the repo root holds `tests`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.graphs import loops  # noqa: E402

SRC = Path(__file__).resolve().parents[1] / "rust" / "tokpipe-core" / "src"

# Folders whose children are units of their own: under `models/`, the shared base and pieces
# sit below the families, and the folder's own file (`ModelWrapper`) above them.
SPLIT = {"models"}


def unit(module: tuple[str, ...]) -> str | None:
    """The unit a module belongs to: its top-level module, or its child under a folder of
    ``SPLIT`` (``models::bpe``); ``None`` for the crate root, which only declares modules."""
    if not module:
        return None
    if module[0] in SPLIT and len(module) > 1:
        return "::".join(module[:2])
    return module[0]


# ---------------------------------------------------------------------------------------------
# Lexing: identifiers, punctuation and string literals; comments, chars, lifetimes and numbers
# dropped. Enough of Rust's grammar to read module declarations, attributes and paths.

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<line_comment>//[^\n]*)
  | (?P<block_comment>/\*)
  | (?P<raw_string>b?r(?P<hashes>\#*)")
  | (?P<string>b?"(?:\\.|[^"\\])*")
  | (?P<char>b?'(?:\\(?:u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'\n])')
  | (?P<lifetime>'[A-Za-z_][A-Za-z0-9_]*)
  | (?P<ident>(?:r\#)?[A-Za-z_][A-Za-z0-9_]*)
  | (?P<number>[0-9][0-9A-Za-z_]*)
  | (?P<path_sep>::)
  | (?P<punct>[^\sA-Za-z0-9_])
    """,
    re.VERBOSE | re.DOTALL,
)


@dataclass
class Token:
    kind: str  # "ident", "string" or "punct"
    text: str
    line: int


def lex(source: str) -> list[Token]:
    tokens: list[Token] = []
    pos, line = 0, 1
    while pos < len(source):
        m = _TOKEN.match(source, pos)
        if m is None:
            raise ValueError(f"cannot lex at line {line}: {source[pos:pos + 20]!r}")
        kind = m.lastgroup if m.lastgroup != "hashes" else "raw_string"
        end = m.end()
        if m.group("block_comment"):
            depth, end = 1, m.end()
            while depth:
                nxt = re.compile(r"/\*|\*/").search(source, end)
                if nxt is None:
                    raise ValueError(f"unterminated block comment at line {line}")
                depth += 1 if nxt.group() == "/*" else -1
                end = nxt.end()
        elif m.group("raw_string") is not None:
            close = '"' + m.group("hashes")
            end = source.index(close, m.end()) + len(close)
            tokens.append(Token("string", source[m.end() : end - len(close)], line))
        elif kind == "string":
            text = m.group()
            tokens.append(Token("string", text[text.index('"') + 1 : -1], line))
        elif kind == "ident":
            tokens.append(Token("ident", m.group().removeprefix("r#"), line))
        elif kind in ("path_sep", "punct"):
            tokens.append(Token("punct", m.group(), line))
        line += source.count("\n", pos, end)
        pos = end
    return tokens


# ---------------------------------------------------------------------------------------------
# The module tree and the paths each module names.


@dataclass
class Reference:
    """A path named in ``module`` (``file:line``), relative to ``base`` (a module path)."""

    module: tuple[str, ...]
    base: tuple[str, ...]
    segments: list[str]
    where: str
    reexport: bool = False  # a `pub use`: also an alias others may name


@dataclass
class Crate:
    modules: set[tuple[str, ...]] = field(default_factory=set)
    references: list[Reference] = field(default_factory=list)
    # (module, name) -> absolute path of what `pub use` makes available under that name
    reexports: dict[tuple[tuple[str, ...], str], list[str]] = field(default_factory=dict)


def _matching(tokens: list[Token], i: int) -> int:
    """Index of the bracket closing the one at ``tokens[i]``."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack = [pairs[tokens[i].text]]
    i += 1
    while stack:
        t = tokens[i].text
        if tokens[i].kind == "punct" and t in pairs:
            stack.append(pairs[t])
        elif tokens[i].kind == "punct" and t == stack[-1]:
            stack.pop()
        i += 1
    return i - 1


def _use_tree(tokens: list[Token], i: int, prefix: list[str], out: list[tuple[list[str], str]]) -> int:
    """Reads one use tree at ``tokens[i]``; appends (path, name it binds) to ``out``."""
    path = list(prefix)
    while True:
        t = tokens[i]
        if t.text == "{":
            end = _matching(tokens, i)
            i += 1
            while i < end:
                i = _use_tree(tokens, i, path, out)
                if tokens[i].text == ",":
                    i += 1
            return end + 1
        if t.text == "*":
            out.append((path + ["*"], "*"))
            return i + 1
        if t.text == "::":
            i += 1
            continue
        path.append(t.text)
        i += 1
        if tokens[i].text == "as":
            out.append((path, tokens[i + 1].text))
            return i + 2
        if tokens[i].text != "::":
            if path[-1] == "self":
                path = path[:-1]
            out.append((path, path[-1] if path else "self"))
            return i


def _is_cfg_test(attr: list[Token]) -> bool:
    texts = [t.text for t in attr]
    return texts[:4] == ["cfg", "(", "test", ")"]


def _read_module(crate: Crate, module: tuple[str, ...], path: Path, in_test: bool) -> None:
    """Reads one file's module (and its inline modules), then the files it declares."""
    crate.modules.add(module)
    tokens = lex(path.read_text(encoding="utf-8"))
    rel = path.relative_to(SRC)
    # Where `mod x;` files live: beside lib.rs/mod.rs, in a folder named after other files.
    child_dir = path.parent if path.name in ("lib.rs", "mod.rs") else path.parent / path.stem
    # Frames: (module path, test-only, bracket depth at which its body closes).
    frames: list[tuple[tuple[str, ...], bool, int]] = [(module, in_test, -1)]
    children: dict[tuple[str, ...], set[str]] = defaultdict(set)
    depth = 0
    test_item_depth: int | None = None  # bracket depth of an item under #[cfg(test)]
    pending_test = False
    pending_path: str | None = None
    # (path, whether under #[cfg(test)], the name a `use` binds): resolved once the file's
    # child modules are all known, since a path may name a child declared further down.
    pending_refs: list[tuple[Reference, bool, str | None]] = []
    files: list[tuple[tuple[str, ...], Path, bool]] = []
    i = 0
    while i < len(tokens):
        t = tokens[i]
        current, frame_test, _ = frames[-1]
        in_test_code = frame_test or test_item_depth is not None
        if t.kind == "punct" and t.text == "#":
            j = i + 1 + (tokens[i + 1].text == "!")
            end = _matching(tokens, j)
            attr = tokens[j + 1 : end]
            if _is_cfg_test(attr):
                if tokens[i + 1].text == "!":
                    frames[-1] = (current, True, frames[-1][2])
                else:
                    pending_test = True
            if attr and attr[0].text == "path" and len(attr) >= 3 and attr[2].kind == "string":
                pending_path = attr[2].text
            i = end + 1
            continue
        if t.kind == "ident" and t.text == "mod" and tokens[i + 1].kind == "ident":
            name = tokens[i + 1].text
            child = current + (name,)
            children[current].add(name)
            test = in_test_code or pending_test
            if tokens[i + 2].text == ";":
                if pending_path is not None:
                    file = path.parent / pending_path
                elif len(frames) == 1:
                    file = child_dir / f"{name}.rs"
                    if not file.exists():
                        file = child_dir / name / "mod.rs"
                else:
                    raise ValueError(f"{rel}: `mod {name};` inside an inline module is not handled")
                files.append((child, file, test))
                i += 3
            else:
                crate.modules.add(child)
                depth += 1
                frames.append((child, test, depth))
                i += 3
            pending_test, pending_path = False, None
            continue
        if t.kind == "ident" and t.text == "use":
            is_pub = tokens[i - 1].text == "pub" or (
                tokens[i - 1].text == ")" and i >= 4 and tokens[i - 4].text == "pub"
            )
            bound: list[tuple[list[str], str]] = []
            i = _use_tree(tokens, i + 1, [], bound)
            for segments, name in bound:
                if segments and segments[-1] == "*":
                    segments = segments[:-1]
                ref = Reference(current, current, segments, f"{rel}:{t.line}", reexport=is_pub)
                pending_refs.append((ref, in_test_code or pending_test, name))
            pending_test = False
            continue
        if t.kind == "ident" and tokens[i + 1].text == "::" and (i == 0 or tokens[i - 1].text not in ("::", "$")):
            segments = [t.text]
            j = i + 1
            while j + 1 < len(tokens) and tokens[j].text == "::" and tokens[j + 1].kind == "ident":
                segments.append(tokens[j + 1].text)
                j += 2
            ref = Reference(current, current, segments, f"{rel}:{t.line}")
            pending_refs.append((ref, in_test_code or pending_test, None))
            i = j
            continue
        if t.kind == "punct" and t.text in "([{":
            depth += 1
            if pending_test and test_item_depth is None:
                test_item_depth = depth - 1
                pending_test = False
        elif t.kind == "punct" and t.text in ")]}":
            depth -= 1
            if len(frames) > 1 and depth == frames[-1][2] - 1:
                frames.pop()
            if test_item_depth is not None and depth == test_item_depth and t.text == "}":
                test_item_depth = None
        elif t.kind == "punct" and t.text == ";":
            if test_item_depth is not None and depth == test_item_depth:
                test_item_depth = None
            if pending_test and test_item_depth is None:
                pending_test = False
        i += 1
    for ref, test, name in pending_refs:
        if test:
            continue
        # Absolute paths from the crate root; relative ones from `self`, `super` or a child.
        head = ref.segments[0] if ref.segments else ""
        if head == "crate":
            ref.base, ref.segments = (), ref.segments[1:]
        elif head in ("self", "super"):
            base, segments = ref.module, ref.segments
            while segments and segments[0] in ("self", "super"):
                base = base[:-1] if segments[0] == "super" else base
                segments = segments[1:]
            ref.base, ref.segments = base, segments
        elif head not in children[ref.module]:
            continue  # a name brought in by a `use` (recorded there), a type, or another crate
        crate.references.append(ref)
        if ref.reexport and name is not None:
            if name == "*":
                raise ValueError(f"{ref.where}: `pub use ...::*` is not followed by this test")
            crate.reexports[(ref.module, name)] = list(ref.base) + ref.segments
    for child, file, test in files:
        _read_module(crate, child, file, test)


def read_crate() -> Crate:
    crate = Crate()
    _read_module(crate, (), SRC / "lib.rs", False)
    return crate


def resolve(crate: Crate, segments: list[str], seen: int = 0) -> tuple[str, ...]:
    """The module that defines what an absolute path names, through re-exports."""
    module: tuple[str, ...] = ()
    for k, name in enumerate(segments):
        if module + (name,) in crate.modules:
            module = module + (name,)
            continue
        target = crate.reexports.get((module, name))
        if target is not None and seen < 32:
            return resolve(crate, target + segments[k + 1 :], seen + 1)
        return module
    return module


def unit_graph(crate: Crate) -> dict[tuple[str, str], list[str]]:
    """(from unit, to unit) -> where the dependency is written."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for ref in crate.references:
        target = resolve(crate, list(ref.base) + ref.segments)
        a, b = unit(ref.module), unit(target)
        if a is None or b is None or a == b:
            continue
        edges[(a, b)].append(f"{ref.where}: {'::'.join(ref.segments)}")
    return edges


def cycles(edges: dict[tuple[str, str], list[str]]) -> list[list[str]]:
    """The strongly connected components of more than one unit."""
    return loops(edges)


def describe(component: list[str], edges: dict[tuple[str, str], list[str]]) -> str:
    lines = [" <-> ".join(component)]
    members = set(component)
    for (a, b), where in sorted(edges.items()):
        if a in members and b in members:
            lines.append(f"  {a} -> {b}: {where[0]}" + (f" (+{len(where) - 1} more)" if len(where) > 1 else ""))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Tests


def test_rust_core_units_form_no_cycle():
    edges = unit_graph(read_crate())
    found = cycles(edges)
    assert not found, "module cycles in tokpipe-core:\n" + "\n".join(describe(c, edges) for c in found)


def test_walk_sees_the_crate():
    """The walk is not vacuous: it reaches every file and sees the uses a cycle is made of."""
    crate = read_crate()
    files = {p for p in SRC.rglob("*.rs")}
    reached = set()
    for module in crate.modules:
        for candidate in (SRC.joinpath(*module).with_suffix(".rs"), SRC.joinpath(*module, "mod.rs")):
            reached.add(candidate)
    missing = {p.relative_to(SRC).as_posix() for p in files - reached}
    assert missing <= {"lib.rs", "pre_tokenizers/scanner_tests.rs"}, missing
    edges = unit_graph(crate)
    # Uses every tokenizer needs: if the walk lost them, a cycle through them would go unseen.
    assert ("tokenizer", "models") in edges or any(a == "tokenizer" and b.startswith("models") for a, b in edges)
    assert any(a == "formats" and b.startswith("models::") for a, b in edges)


def test_cycle_is_found():
    """The detector itself: a made-up graph with a cycle through three units."""
    edges = {("a", "b"): ["x"], ("b", "c"): ["y"], ("c", "a"): ["z"], ("c", "d"): ["w"]}
    assert cycles(edges) == [["a", "b", "c"]]
    assert cycles({("a", "b"): ["x"], ("b", "c"): ["y"]}) == []


# ---------------------------------------------------------------------------------------------
# The binding: one gate releases the GIL, one file makes Python errors.

BINDING = SRC.parents[1] / "tokpipe-py" / "src"


def _calls(path: Path) -> list[tuple[int, str]]:
    """(line, name) of every method called as ``.name(`` and every ``Type::new_err(`` in the
    code of ``path`` (comments and strings left out)."""
    tokens = lex(path.read_text(encoding="utf-8"))
    found = []
    for i in range(1, len(tokens) - 1):
        t = tokens[i]
        if t.kind == "ident" and tokens[i + 1].text == "(" and tokens[i - 1].text in (".", "::"):
            name = t.text if tokens[i - 1].text == "." else f"{tokens[i - 2].text}::{t.text}"
            found.append((t.line, name))
    return found


def test_binding_releases_the_gil_only_through_its_gate():
    """``gate::enter`` releases the GIL, catches panics and maps errors; no binding does the
    first without the other two."""
    assert (BINDING / "gate.rs").exists()
    elsewhere = [
        f"{path.name}:{line}: {name}"
        for path in sorted(BINDING.glob("*.rs"))
        if path.name != "gate.rs"
        for line, name in _calls(path)
        if name in ("detach", "allow_threads")
    ]
    assert not elsewhere, "the GIL is released outside gate.rs:\n" + "\n".join(elsewhere)
    assert any(name == "detach" for _, name in _calls(BINDING / "gate.rs"))


def test_binding_makes_python_errors_only_in_errors_rs():
    """Every error the binding raises is mapped in ``errors.rs`` onto ``tokpipe.errors``."""
    elsewhere = [
        f"{path.name}:{line}: {name}"
        for path in sorted(BINDING.glob("*.rs"))
        if path.name != "errors.rs"
        for line, name in _calls(path)
        if name.endswith("::new_err")
    ]
    assert not elsewhere, "Python errors made outside errors.rs:\n" + "\n".join(elsewhere)


if __name__ == "__main__":
    graph = unit_graph(read_crate())
    for (a, b), where in sorted(graph.items()):
        print(f"{a} -> {b}  ({len(where)}: {where[0]})")
    for component in cycles(graph):
        print("CYCLE", describe(component, graph))
