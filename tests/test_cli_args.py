"""An argument error answers before torch is imported (issue 56): `ugttt train --task cp62` and the like take the time to
import the command line's own modules (under a second on an idle 2-core machine), not the 3-4 s of torch. Each case
runs `ugttt.cli.main` in a fresh interpreter and checks the exit code, the one-line message and that `torch` is not in
`sys.modules` afterwards; no model, sandbox or run is involved, so this runs in `make test-fast`."""
import json, os, subprocess, sys
from pathlib import Path

import pytest
from fastcore.test import test_eq

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}
PROBE = """
import json, sys
from ugttt.cli import main
try: code = main(json.loads(sys.argv[1]))
except SystemExit as e: code = e.code
print(json.dumps(dict(code=code, torch="torch" in sys.modules)))
"""


def run_main(argv: list[str], cwd: Path) -> tuple[dict, str]:
    "main(argv) in a fresh interpreter: its exit code, whether torch was imported, and its stderr."
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)], env=ENV, cwd=cwd, capture_output=True, text=True, timeout=120)
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


@pytest.mark.parametrize("argv,words", [
    (["train", "--task", "cp62", "--out", "r"], "unknown task 'cp62'"),
    (["train", "--epochs", "six", "--out", "r"], "--epochs: cannot read 'six' as int"),
    (["train", "--group_size", "1", "--out", "r"], "group_size must be an int >= 2"),
    (["train", "--threads", "0", "--out", "r"], "--threads: must be an int in [1,"),
    (["train", "--epochz", "2", "--out", "r"], "unrecognized arguments: --epochz"),
    (["train", "--out", "."], "already exists; add --resume to continue it"),
    (["train", "--resume", "--out", "nowhere"], "cannot resume: nowhere does not exist"),
    (["report", "nowhere"], "nowhere does not exist"),
    (["plan", "--task", "cp62"], "unknown task 'cp62'"),
])
def test_an_argument_error_is_one_line_before_torch_is_imported(argv, words, tmp_path):
    out, err = run_main(argv, tmp_path)
    test_eq(out, dict(code=2, torch=False))
    test_eq((err.count("\n"), words in err, "Traceback" in err), (1, True, False))
    test_eq(list(tmp_path.iterdir()), [])                       # nothing written


def test_replay_help_still_lists_the_variants():
    "The variants' names need ugttt.replay (and torch): loaded when replay's help is shown, not to parse."
    proc = subprocess.run([sys.executable, "-c", "from ugttt.cli import main; main(['replay', '--help'])"], env=ENV,
                          capture_output=True, text=True, timeout=300)
    test_eq(proc.returncode, 0)
    assert "as_trained, dropout_off" in " ".join(proc.stdout.split()), proc.stdout[-2000:]
