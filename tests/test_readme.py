"""The README's two commands: CI runs the test command, and the main job's command works."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _commands() -> list[str]:
    return re.findall(r"```bash\n(.+?)\n```", (ROOT / "README.md").read_text())


def test_readme_has_exactly_two_quickstart_commands_and_ci_runs_the_test_one():
    main_job, tests = _commands()
    assert main_job.endswith("normsat report") and tests.endswith("python -m pytest")
    assert "torch" not in main_job or "torch==2.13.0" in main_job
    assert "-c constraints.txt" in main_job and "-c constraints.txt" in tests
    assert "torch==2.13.0" in (ROOT / "constraints.txt").read_text()
    assert tests in (ROOT / ".ci" / "run").read_text().splitlines()


def test_main_job_command_runs(tmp_path):
    program, *arguments = shlex.split(_commands()[0].split("&&")[-1])
    # The console script installed beside this interpreter, also when its venv is not activated.
    script = Path(sys.executable).parent / program
    executable = str(script) if script.exists() else shutil.which(program)
    assert executable, f"the console script {program!r} is not installed"
    done = subprocess.run([executable, *arguments, "--out", str(tmp_path), "--quiet"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "report.md").is_file() and (tmp_path / "results.json").is_file()
    for figure in ("similarity.png", "heads.png", "training_norms.png", "training_saturation.png"):
        assert (tmp_path / figure).is_file(), figure

    def reject(constant: str) -> None:
        raise AssertionError(f"results.json is not strict JSON: it contains {constant}")

    results = json.loads((tmp_path / "results.json").read_text(), parse_constant=reject)
    assert list(results["sections"]) == ["similarity", "degree", "limit", "heads", "training"]
    assert results["sections"]["degree"]["degree"] == 1  # a number, as in `normsat degree --json`
