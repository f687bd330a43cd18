"""Every `dpcomm ...` command shown in the README and in docs/ parses with today's CLI.

The commands are read from the code blocks; usage lines with placeholders are skipped,
optional parts written as ``[...]`` are dropped and ``A|B`` alternatives take the first.
Parsing (not running) checks that every subcommand and option a user copies still exists and
accepts the value shown.
"""

import doctest
import re
import shlex
from pathlib import Path

import pytest

from dpcomm.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _commands(path: Path) -> list[tuple[str, int, str]]:
    found = []
    text = path.read_text()
    for block in re.finditer(r"```[a-z]*\n(.*?)```", text, re.S):
        start = text[: block.start()].count("\n") + 2
        lines = block.group(1).replace("\\\n", " ").splitlines()
        for offset, line in enumerate(lines):
            for part in re.split(r"&&|\|\s", line.split(" #", 1)[0]):
                part = part.strip().removeprefix("$ ")
                if part.startswith("dpcomm ") or part.startswith(".venv/bin/dpcomm "):
                    found.append((path.name, start + offset, part))
    return found


def _synopsis(command: str) -> bool:
    """A usage line with placeholders (``--targets T --sampling σ ...``), not a command."""
    return "..." in command.replace('"..."', "") or bool(
        re.search(r"--[\w-]+ [^\W\d_](?:\s|$)", command)
    )


COMMANDS = [c for path in FILES for c in _commands(path) if not _synopsis(c[2])]


def test_the_docs_show_commands():
    assert len(COMMANDS) >= 10


@pytest.mark.parametrize(("name", "line", "command"), COMMANDS, ids=lambda v: str(v))
def test_a_documented_command_parses(name, line, command):
    text = re.sub(r"\[[^\]]*\]", " ", command)  # optional parts
    words = shlex.split(text)[1:]
    # "A|B" alternatives: the first.
    words = [w.split("|")[0] if re.fullmatch(r"[\w-]+(\|[\w-]+)+", w) else w for w in words]
    try:
        build_parser().parse_args(words)
    except SystemExit as exit_:
        pytest.fail(f"{name}:{line}: `{command}` does not parse (exit {exit_.code})")


#: The Python blocks a reader copies whole (docs/dask-engine.md's is a sketch with a path),
#: each with the ``text`` block right after it (what it prints), if any.
_PYTHON_BLOCK = re.compile(r"```python\n(.*?)```\n(?:\n```text\n(.*?)```\n)?", re.S)
PYTHON_BLOCKS = [
    (path.name, index, (match.group(1), match.group(2)))
    for path in (ROOT / "README.md", ROOT / "docs" / "index.md", ROOT / "docs" / "accounting.md")
    for index, match in enumerate(_PYTHON_BLOCK.finditer(path.read_text()))
]
_OUTPUT_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def check_printed(name: str, code: str, shown: str | None, printed: str) -> None:
    """What a block printed is the ``text`` block shown after it (``...`` for noisy values)."""
    if shown is None:
        return
    checker = doctest.OutputChecker()
    if not checker.check_output(shown, printed, _OUTPUT_FLAGS):
        diff = checker.output_difference(doctest.Example(code, shown), printed, _OUTPUT_FLAGS)
        pytest.fail(f"{name}: a block prints other than it shows:\n{code}\n{diff}")


def test_the_docs_show_python():
    assert len(PYTHON_BLOCKS) >= 3


@pytest.mark.parametrize(("name", "index", "block"), PYTHON_BLOCKS, ids=lambda v: str(v)[:20])
def test_a_documented_python_block_runs(name, index, block, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # files a block writes (a ledger, ...) stay out of the checkout
    code, shown = block
    namespace: dict[str, object] = {}
    exec(compile(code, f"{name} python block {index + 1}", "exec"), namespace)
    check_printed(name, code, shown, capsys.readouterr().out)
    split = getattr(namespace.get("plan"), "split", None)
    if split is not None:  # the split's promise: the run reports the guarantee planned
        run = namespace["run"]
        assert run.report.release.epsilon_total == split.composition.epsilon <= split.epsilon
    if name == "index.md":  # the calibration's promise: the run reports the planned ε
        plan, run = namespace["plan"], namespace["run"]
        assert plan.epsilon <= 2.0
        assert run.report.privacy.epsilon == pytest.approx(plan.epsilon, rel=1e-9)
    elif "plan" in namespace:
        assert namespace["plan"].epsilon <= 1.0


#: A page whose Python blocks are one session: they run in order in one namespace, and the
#: ``text`` block right after a Python block is what that block prints.
SESSION_PAGES = [ROOT / "docs" / "tutorial.md"]
_SESSION_BLOCK = re.compile(r"```python\n(.*?)```\n(?:\n```text\n(.*?)```\n)?", re.S)


def session_blocks(path: Path) -> list[tuple[str, str | None]]:
    """The page's Python blocks in order, each with the text block that shows its output."""
    return [(m.group(1), m.group(2)) for m in _SESSION_BLOCK.finditer(path.read_text())]


def run_session(path: Path, capsys: pytest.CaptureFixture[str]) -> list[tuple[str, str]]:
    """Run the page's blocks in one namespace: each block's code and what it printed."""
    namespace: dict[str, object] = {"__name__": "__main__"}
    printed = []
    for index, (code, _) in enumerate(session_blocks(path)):
        exec(compile(code, f"{path.name} python block {index + 1}", "exec"), namespace)
        printed.append((code, capsys.readouterr().out))
    return printed


@pytest.mark.parametrize("path", SESSION_PAGES, ids=lambda p: p.name)
def test_a_session_page_prints_what_it_shows(path, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # files a block writes stay out of the checkout
    blocks = session_blocks(path)
    assert len(blocks) >= 5 and sum(shown is not None for _, shown in blocks) >= 5
    for (code, shown), (_, printed) in zip(blocks, run_session(path, capsys), strict=True):
        if shown is None:
            assert printed == "", f"{path.name}: a block prints but shows no output:\n{code}"
        check_printed(path.name, code, shown, printed)
