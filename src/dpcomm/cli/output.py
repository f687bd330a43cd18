"""What several commands print the same way: aligned tables and progress bars."""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from dpcomm.errors import DpcommError, InvalidParameterError, shown


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "") -> None:
    """``header`` and ``rows``, every column right-aligned to its widest cell, after ``indent``."""
    widths = [max([len(h), *(len(row[i]) for row in rows)]) for i, h in enumerate(header)]
    for line in [header, *rows]:
        print(indent + "  ".join(cell.rjust(w) for cell, w in zip(line, widths, strict=True)))


def show_progress(args: argparse.Namespace) -> bool:
    """The one progress-bar policy of every long command (tqdm, on standard error).

    On when standard error is a terminal, off when it is piped or redirected; ``--quiet``
    turns it off, ``--progress`` (where a command has it) on even when piped.
    """
    if getattr(args, "quiet", False):
        return False
    return bool(getattr(args, "progress", False)) or sys.stderr.isatty()


def add_progress_options(parser: argparse.ArgumentParser) -> None:
    """``--quiet`` and ``--progress``: the progress-bar policy of `show_progress`."""
    parser.add_argument(
        "--quiet", action="store_true", help="no progress bar (default: one on a terminal)"
    )
    parser.add_argument(
        "--progress", action="store_true", help="a progress bar even when stderr is not a terminal"
    )


def check_writable_file(option: str, path: str) -> Path:
    """``path`` if a file can be written there: its folder exists and is writable.

    Checked before any long computation, so that no result is lost to a mistyped path: a
    folder, a symbolic link to nowhere, or a file that cannot be created or opened for writing
    (``/proc/x.csv``, even as root) is refused. The check opens the file (creating it, then
    removing it, when it does not exist) without writing to it.
    """
    target = Path(path)
    if path == "" or target.is_dir():
        raise InvalidParameterError(option, "a file path (not a folder)", path)
    if target.is_symlink() and not target.exists():
        raise InvalidParameterError(option, "a file path (not a symbolic link to nowhere)", path)
    folder = target.parent
    if not folder.is_dir():
        raise InvalidParameterError(option, "a file in an existing folder", path)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InvalidParameterError(option, "a file in a writable folder", path)
    created = not target.exists()
    flags = os.O_WRONLY | os.O_NONBLOCK | (os.O_CREAT | os.O_EXCL if created else os.O_APPEND)
    try:
        os.close(os.open(target, flags, 0o644))
    except OSError as error:
        raise InvalidParameterError(
            option, f"a file that can be written ({error.strerror})", path
        ) from None
    if created:
        target.unlink()
    return target


def same_file(first: Path, second: Path) -> bool:
    """Whether two paths name one file (symbolic links and hard links followed)."""
    if first.resolve() == second.resolve():
        return True
    try:
        return os.path.samefile(first, second)
    except OSError:  # one of them does not exist
        return False


def within(path: Path, folder: Path) -> bool:
    """Whether ``path`` lies inside ``folder`` (both resolved)."""
    return path.resolve().is_relative_to(folder.resolve())


def check_writable_folder(option: str, path: str) -> Path:
    """``path`` if it is, or can be created as, a writable folder (checked up front)."""
    target = Path(path)
    if path == "":
        raise InvalidParameterError(option, "a folder path", path)
    existing = target
    while not existing.exists() and not existing.is_symlink():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        raise InvalidParameterError(
            option, "a folder (or a new one inside an existing folder)", path
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InvalidParameterError(option, "a writable folder", path)
    return target


def bounded_int(minimum: int | None, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer in [minimum, maximum] (a bound None: none, or the library's)."""
    if minimum is None:
        allowed = f"<= {maximum}"
    elif maximum is None:
        allowed = f">= {minimum}"
    else:
        allowed = f"in [{minimum}, {maximum}]"

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected an integer {allowed}, got {text!r}"
            ) from None
        if (maximum is not None and value > maximum) or (minimum is not None and value < minimum):
            raise argparse.ArgumentTypeError(f"expected an integer {allowed}, got {text!r}")
        return value

    convert.__name__ = "int"
    return convert


#: An argparse type: an integer >= 0.
non_negative_int = bounded_int(0)


def _finite_float(text: str, *, strict: bool) -> float:
    """A finite number > 0 (``strict``) or >= 0, for argparse (ArgumentTypeError if not)."""
    allowed = "a finite number > 0" if strict else "a finite number >= 0"
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {allowed}, got {text!r}") from None
    if not math.isfinite(value) or value < 0 or (strict and value == 0):
        raise argparse.ArgumentTypeError(f"expected {allowed}, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """An argparse type: a finite number > 0 (seconds, ...)."""
    return _finite_float(text, strict=True)


def fraction(text: str) -> float:
    """An argparse type: a number in [0, 1] (NaN and infinities refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 1], got {text!r}") from None
    if not 0.0 <= value <= 1.0:  # False for NaN
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 1], got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """An argparse type: a finite number >= 0 (an ε, ...)."""
    return _finite_float(text, strict=False)


def command_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, str]:
    """The flag of every option of the command ``args`` was parsed for, by its destination.

    The options of ``parser`` and of each subcommand ``args`` names, each by its longest
    option string. An option's destination is the library parameter it sets (``--targets``
    sets ``num_targets``), so that an error naming the parameter names the flag the user
    typed (`with_flags`), without a table of flags beside the parser.
    """
    flags: dict[str, str] = {}
    current: argparse.ArgumentParser | None = parser
    while current is not None:
        chosen = None
        for action in current._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(str(getattr(args, action.dest, "")))
            elif action.option_strings:
                flags[action.dest] = max(action.option_strings, key=len)
        current = chosen
    return flags


#: Plain words replaced by their flag inside a message's text too (other plain words, such
#: as ``delta`` or ``seed``, only when written ``name=value``; identifiers always).
_PLAIN_WORDS = ("timeout",)


def flags_in(text: str, flags: Mapping[str, str]) -> str:
    """``text`` with the Python parameters it names written as the CLI's ``flags``.

    ``name=True`` becomes ``--flag``, ``name='value'`` ``--flag value``, and a parameter
    written as an identifier (``max_text_bytes``) its flag; ``flags``: by parameter, as
    `command_flags` gives them.

    Examples:
        >>> flags = {"max_text_bytes": "--max-text-bytes", "force": "--force", "engine": "--engine"}
        >>> flags_in("raise max_text_bytes, or pass force=True; only with engine='dask'", flags)
        'raise --max-text-bytes, or pass --force; only with --engine dask'
    """
    if not flags:
        return text
    names = sorted(flags, key=len, reverse=True)
    assigned = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")=(True\b|'[^']*')")
    words = [name for name in names if "_" in name or name in _PLAIN_WORDS]

    def flag_of(match: re.Match[str]) -> str:
        flag, value = flags[match.group(1)], match.group(2)
        return flag if value == "True" else f"{flag} {value.strip(chr(39))}"

    text = assigned.sub(flag_of, text)
    if not words:
        return text
    identifiers = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, words)) + r")\b")
    return identifiers.sub(lambda m: flags[m.group(1)], text)


def with_flags(error: DpcommError, flags: Mapping[str, str]) -> str:
    """The message of ``error`` as the CLI prints it: parameters named by their ``flags``.

    An `dpcomm.errors.InvalidParameterError` names its parameter's flag (a paper's symbol
    after it, as in ``num_targets T``, is dropped), and what it allows is rewritten by
    `flags_in` (the value given is printed as it is).
    """
    text = str(error)
    given = shown(error.given) if isinstance(error, InvalidParameterError) else ""
    if isinstance(error, InvalidParameterError) and text == (
        f"invalid {error.name}: expected {error.allowed}, got {given}"
    ):
        parameter = re.sub(r" [A-Z]$", "", error.name)
        name = flags.get(parameter) or flags_in(error.name, flags)
        return f"invalid {name}: expected {flags_in(error.allowed, flags)}, got {given}"
    return flags_in(text, flags)
