"""``dir(dpcomm)`` lists the front door (``__all__``) before any name is imported."""

import os
import subprocess
import sys


def test_dir_lists_all_before_first_use():
    code = (
        "import dpcomm\n"
        "names = dir(dpcomm)\n"
        "print(names == sorted(dpcomm.__all__), 'datasets' in names, 'Scramblers' in names)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.stdout.split() == ["True", "True", "True"]
