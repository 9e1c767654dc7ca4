"""`make gpu-check`'s script at its dry run: every step on the CPU at tiny sizes, each CSV written and stamped."""

import importlib.util
from pathlib import Path

import pandas as pd

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"


def test_the_dry_run_runs_every_step_and_writes_its_tables(tmp_path):
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    out = gpu_check.main(["--dry-run", "--out", str(tmp_path)])
    checks = pd.read_csv(out / "checks.csv")
    assert (checks.result == "pass").all(), checks
    assert {"cuda tests", "fp32 scores", "allowed tokens only", "checkpoint resume"} <= set(checks.check)
    assert checks.check.str.startswith("batch invariance").any()
    speed = pd.read_csv(out / "speed.csv")
    assert speed.model.nunique() == 2 and set(speed.batch) == {2, 5}
    assert (speed.block_cost > 0).all() and (speed.glauber_rate > 0).all()
    cells = pd.read_csv(out / "fig2_cell.csv")
    assert len(cells) == 10 and (cells.pairs == 2).all() and (cells.budget == 30).all()  # the paper's ten taus
    for table in (checks, speed, cells):
        assert (table.device == "CPU (dry run)").all() and table.measured.str.endswith("UTC").all()
    assert (out / "tests.txt").read_text().strip()
