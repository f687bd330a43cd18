"""The README's headline table is what `dpcomm headline` computes (no hand-edited numbers)."""

from pathlib import Path

import pytest

from dpcomm.experiments.headline import headline_markdown, headline_rows

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.mark.slow
def test_readme_table_matches_the_command():
    computed = headline_markdown(headline_rows())
    table = [line for line in computed.splitlines() if line.startswith("|")]
    text = README.read_text()
    for line in table:
        assert line in text, f"README headline row differs from `dpcomm headline`: {line}"
