"""No function in src/dpcomm is over 80 lines (docstring included): long ones are split into
helpers that each do one job."""

import ast
import functools
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2] / "src" / "dpcomm"
#: Longest function allowed, in lines from ``def`` to its last line (ast's lineno, end_lineno).
MAX_LINES = 80

#: Functions still over MAX_LINES, by qualified name, with their length when listed. This list
#: must only shrink: a function here may get shorter (then write its new length, or remove it
#: once it is within MAX_LINES), never longer, and no function is ever added.
ALLOWED = {}


@functools.cache
def function_lengths():
    """Every function and method of src/dpcomm: qualified name → lines (parsed once)."""
    lengths = {}
    for path in sorted(SOURCE.rglob("*.py")):
        parts = path.relative_to(SOURCE.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        stack = [(ast.parse(path.read_text()), module)]
        while stack:
            node, prefix = stack.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    name = f"{prefix}.{child.name}"
                    if not isinstance(child, ast.ClassDef):
                        lengths[name] = child.end_lineno - child.lineno + 1
                    stack.append((child, name))
                else:
                    stack.append((child, prefix))
    return lengths


def test_no_function_is_over_the_limit():
    lengths = function_lengths()
    over = {
        name: lines
        for name, lines in lengths.items()
        if lines > MAX_LINES and lines > ALLOWED.get(name, MAX_LINES)
    }
    assert not over, f"functions over {MAX_LINES} lines (split them): {over}"


def test_the_allowed_list_only_shrinks():
    lengths = function_lengths() if ALLOWED else {}  # an empty list has nothing to shrink
    done = sorted(name for name in ALLOWED if lengths.get(name, 0) <= MAX_LINES)
    assert not done, f"within {MAX_LINES} lines now or gone: remove from ALLOWED: {done}"
    shorter = {name: lengths[name] for name in ALLOWED if lengths[name] < ALLOWED[name]}
    assert not shorter, f"shorter now: write these lengths in ALLOWED: {shorter}"
