"""`make test` runs the tests marked ``serial`` from ``tests/integration`` alone, and every
other test in parallel without them: a serial test in another folder would run in neither."""

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_serial_test_is_an_integration_test():
    outside = [
        str(path.relative_to(TESTS))
        for folder in ("unit", "property", "reference")
        for path in (TESTS / folder).rglob("*.py")
        if path != Path(__file__).resolve() and "mark.serial" in path.read_text()
    ]
    assert outside == [], outside
