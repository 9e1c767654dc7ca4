"""Run one notebook over a grid of parameters, each grid cell a papermill run scheduled by Dask distributed.

    python sweep.py NOTEBOOK -p NAME VALUE [VALUE ...] [-p NAME VALUE ...] [--profile PROFILE]
                    [--workers N] [--scheduler ADDRESS] [--out DIR]

The grid is the product of the ``-p`` lists; each value is read the way ``papermill -p`` reads it (papermill's own
helper: ``True``/``False``/``None``, then int, then float, else the string). Every cell of the grid runs
``papermill`` in its own process, with the notebook's ``profile`` parameter and ``GLAUBER_PROFILE`` set to
``--profile`` and ``GLAUBER_RESULTS`` set to the cell's folder, so the chapter's CSVs land beside its executed
notebook:

    DIR/index.csv                       one row per cell: cell, one column per parameter, status, seconds, error
    DIR/<cell>/<notebook>.ipynb         the executed notebook (on failure: up to the failing cell)
    DIR/<cell>/<notebook>/*.csv         the cell's tables (``bt.results_dir``); DIR/<cell>/papermill.log its log
    DIR/merged/<table>.csv              every done cell's rows of that table, with ``cell`` and parameter columns

The cell id is the parameters in name order, e.g. ``seed=1__steps=400``; characters outside ``[A-Za-z0-9._+-]``
become ``-`` and then a short hash of the exact values keeps ids distinct. DIR defaults to
``results/sweeps/<notebook>-<profile>/``. The index is rewritten after every finished cell, so an interrupted
sweep loses nothing done: a rerun skips the cells already ``done`` and runs the rest (failed cells included).
A failed cell is recorded with its error and the others still run; the exit status is 1 when any cell of the
grid failed, 2 for bad command-line input (one error line), 0 otherwise. Ctrl-C or SIGTERM (``scancel``) stops
the sweep and the papermill runs it started; cells stopped that way are rerun next time. As with ``papermill -p``,
a list-valued parameter (``temperatures``) arrives in the notebook as a string: sweep scalar parameters.

Scheduling is Dask's: without ``--scheduler`` a ``LocalCluster`` of ``--workers`` single-threaded worker
processes (default: one per GPU, each pinned to its GPU through ``CUDA_VISIBLE_DEVICES``, else cores // 2, at
least 1); with ``--scheduler tcp://host:8786`` the cells go to a running cluster (``dask scheduler`` and
``dask worker``, or dask-jobqueue on SLURM), whose workers must see NOTEBOOK and DIR at the same paths. On a
local CPU cluster each kernel gets ``OMP_NUM_THREADS`` (and ``MKL_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``, which
a Dask worker otherwise sets to 1) = cores // workers, or the caller's ``OMP_NUM_THREADS`` where it is set.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import hashlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

FIXED_COLUMNS = ("cell", "status", "seconds", "error")
REPO_ROOT = Path(__file__).resolve().parent
ERROR_CHARS = 500
STOP_POLL_SECONDS = 5


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad input in one line (exit status 2)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


def papermill_value(text: str):
    """`text` read as `papermill -p NAME VALUE` reads VALUE: True, False, None, an int, a float, else the text
    itself (tests/test_sweep.py checks this against papermill's command line)."""
    constants = {"True": True, "False": False, "None": None}
    if text in constants:
        return constants[text]
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def profile_names() -> tuple[str, ...]:
    """The profile names, defined once in `profiles` (standard library only: a bad command line need not wait for
    torch)."""
    from profiles import PROFILES

    return PROFILES


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    profiles = profile_names()
    parser = _Parser(
        prog="sweep.py",
        description="Run NOTEBOOK over the grid of -p values with papermill on Dask.",
        usage="%(prog)s NOTEBOOK -p NAME VALUE [VALUE ...] [-p NAME VALUE ...] [--profile PROFILE]\n"
        "                [--workers N] [--scheduler ADDRESS] [--out DIR]",
    )
    parser.add_argument("notebook", metavar="NOTEBOOK", help="the .ipynb to run")
    parser.add_argument(
        "-p",
        "--parameter",
        dest="parameters",
        nargs="+",
        action="append",
        default=[],
        metavar=("NAME VALUE", "VALUE"),
        help="a parameter and its values (repeat -p for more)",
    )
    parser.add_argument("--profile", default="quick", help=f"one of {', '.join(profiles)} (default quick)")
    parser.add_argument(
        "--workers", type=int, metavar="N", help="local worker processes (default: one per GPU, else cores // 2)"
    )
    parser.add_argument("--scheduler", metavar="ADDRESS", help="a running Dask scheduler, e.g. tcp://host:8786")
    parser.add_argument("--out", metavar="DIR", help="results folder (default results/sweeps/<notebook>-<profile>)")
    args = parser.parse_args(argv)

    notebook = Path(args.notebook)
    if not notebook.is_file() or notebook.suffix != ".ipynb":
        parser.error(f"no such notebook: {args.notebook} (give the path of an .ipynb file)")
    args.notebook = notebook.resolve()
    if args.profile not in profiles:
        parser.error(f"--profile must be one of {', '.join(profiles)}, got {args.profile!r}")
    if args.workers is not None and args.workers < 1:
        parser.error(f"--workers must be at least 1, got {args.workers}")
    if not args.parameters:
        parser.error("give at least one -p NAME VALUE [VALUE ...]")
    values = {}
    for name, *raw in args.parameters:
        if not raw:
            parser.error(f"-p {name} has no values (give -p NAME VALUE [VALUE ...])")
        if name in values:
            parser.error(f"-p {name} is given twice (list all its values after one -p)")
        if name == "profile":
            parser.error("set the profile with --profile, not -p profile")
        if name in FIXED_COLUMNS:
            parser.error(f"a parameter cannot be named {name!r} (an index column)")
        values[name] = list(dict.fromkeys(raw))  # a repeated value is one cell
    try:  # papermill takes seconds to import: only once the command line itself is well formed
        import papermill

        declared = papermill.inspect_notebook(str(args.notebook))
    except Exception as exc:  # an unreadable notebook is bad input too
        parser.error(f"cannot read the parameters of {args.notebook.name}: {exc}")
    for name in values:
        if name not in declared:
            known = f"its parameters: {', '.join(declared)}" if declared else "it has no cell tagged parameters"
            parser.error(f"{args.notebook.name} has no parameter {name!r}; {known}")
    args.values = values
    args.declared = declared
    args.out = (
        Path(args.out).resolve()
        if args.out
        else REPO_ROOT / "results" / "sweeps" / (f"{args.notebook.stem}-{args.profile}")
    )
    return args


def grid(values: dict[str, list[str]]) -> list[dict[str, str]]:
    """All cells of the grid: the product of the value lists, as raw strings (as typed on the command line)."""
    return [dict(zip(values, combo)) for combo in itertools.product(*values.values())]


def cell_id(raw: dict[str, str]) -> str:
    """A deterministic, readable folder name for a cell: name=value joined by '__', names in order."""
    parsed = {name: papermill_value(raw[name]) for name in sorted(raw)}
    parts = [f"{name}={value}" for name, value in parsed.items()]
    safe = "__".join(re.sub(r"[^A-Za-z0-9._+=-]", "-", part) for part in parts)
    if safe != "__".join(parts) or len(safe) > 120:
        exact = json.dumps([[name, type(value).__name__, value] for name, value in parsed.items()])
        safe = f"{safe[:110]}~{hashlib.sha1(exact.encode()).hexdigest()[:8]}"
    return safe


def read_index(path: Path) -> tuple[list[str], dict[str, dict[str, str]]]:
    """The parameter columns and the rows (by cell id) of an existing index.csv; empty when there is none."""
    if not path.is_file():
        return [], {}
    with path.open(newline="") as file:
        reader = csv.DictReader(file)
        header = reader.fieldnames or []
        if not set(FIXED_COLUMNS) <= set(header):
            raise ValueError(f"{path} is not a sweep index (columns {', '.join(FIXED_COLUMNS)} expected)")
        return [c for c in header if c not in FIXED_COLUMNS], {row["cell"]: row for row in reader}


def write_index(path: Path, names: list[str], rows: dict[str, dict[str, str]]) -> None:
    """Rewrite index.csv atomically (a temporary file renamed over it)."""
    temporary = path.with_suffix(".csv.tmp")
    with temporary.open("w", newline="") as file:
        writer = csv.DictWriter(file, ["cell", *names, "status", "seconds", "error"], restval="")
        writer.writeheader()
        writer.writerows(row for row in rows.values() if row)  # cells not finished yet have no row
    os.replace(temporary, path)


def _one_line(text: str) -> str:
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # ANSI colours of IPython tracebacks
    return " ".join(text.split())[:ERROR_CHARS]


def _notebook_error(path: Path) -> str:
    """'Name: message' of the first error output in an executed notebook, or '' when there is none."""
    try:
        cells = json.loads(path.read_text())["cells"]
    except (OSError, ValueError, KeyError):
        return ""
    for cell in cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                return f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"
    return ""


def _stopped(stop: str) -> bool:
    """Whether the sweep that submitted this task has set its stop Event (it was interrupted)."""
    try:
        from distributed import Event

        return Event(stop).is_set()
    except Exception:  # no scheduler to ask (a local cluster shutting down): keep going
        return False


def run_cell(
    notebook: str,
    cell_dir: str,
    raw: dict[str, str],
    profile: str | None,
    env: dict[str, str],
    gpu_ids: list[str],
    stop: str = "",
) -> dict[str, object]:
    """One grid cell, on a Dask worker: papermill NOTEBOOK into cell_dir in a fresh process.

    Dask cannot stop a running task, so the task polls the Dask Event named `stop` and interrupts papermill
    (and with it the kernel) when the sweep was interrupted: no cell keeps writing after its sweep is gone.
    Returns {"status": "done" | "failed", "seconds": wall time, "error": one line ("" when done)}."""
    start = time.perf_counter()
    folder, source = Path(cell_dir), Path(notebook)
    if folder.exists():
        shutil.rmtree(folder)  # leftovers of an interrupted or failed attempt
    folder.mkdir(parents=True)
    output = folder / source.name
    env = {**os.environ, **env, "GLAUBER_RESULTS": str(folder)}
    if gpu_ids:  # a local cluster on a GPU machine: worker k gets GPU k
        from distributed import get_worker

        env["CUDA_VISIBLE_DEVICES"] = gpu_ids[int(get_worker().name) % len(gpu_ids)]
    command = [
        sys.executable,
        "-m",
        "papermill",
        str(source),
        str(output),
        "--cwd",
        str(source.parent),
        "--no-progress-bar",
    ]
    for name, value in raw.items():
        command += ["-p", name, value]
    if profile is not None:
        command += ["-p", "profile", profile]
    try:
        with (folder / "papermill.log").open("w") as log:
            process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    except OSError as exc:
        return {"status": "failed", "seconds": time.perf_counter() - start, "error": _one_line(f"{exc!r}")}
    while True:
        try:
            returncode = process.wait(timeout=STOP_POLL_SECONDS)
            break
        except subprocess.TimeoutExpired:
            if stop and _stopped(stop):
                process.send_signal(signal.SIGINT)  # papermill shuts its kernel down on KeyboardInterrupt
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
                return {
                    "status": "failed",
                    "seconds": time.perf_counter() - start,
                    "error": "stopped: the sweep was interrupted",
                }
    seconds = time.perf_counter() - start
    if returncode == 0:
        return {"status": "done", "seconds": seconds, "error": ""}
    error = _notebook_error(output)
    if not error:
        lines = [line for line in (folder / "papermill.log").read_text(errors="replace").splitlines() if line.strip()]
        error = f"papermill exited with status {returncode}" + (f": {lines[-1]}" if lines else "")
    return {"status": "failed", "seconds": seconds, "error": _one_line(error)}


def merge_tables(out: Path, stem: str, names: list[str], rows: dict[str, dict[str, str]]) -> list[Path]:
    """DIR/merged/<table>.csv: each table's rows from every done cell, with `cell` and the parameters as columns.

    <table> is the CSV's path inside the cell folder, less the notebook's own results folder. A parameter that
    is also a column of the table is added as <name>_param. Every field is copied as written (text)."""
    import pandas as pd

    tables: dict[Path, list] = {}
    for cell, row in rows.items():
        folder = out / cell
        if not row or row["status"] != "done" or not folder.is_dir():
            continue
        labels = {"cell": cell, **{name: papermill_value(row.get(name, "")) for name in names}}
        for path in sorted(folder.rglob("*.csv")):
            table = path.relative_to(folder)
            if len(table.parts) > 1 and table.parts[0] == stem:
                table = Path(*table.parts[1:])
            try:  # every field as written: read as a number, a commit like 30e5489 became inf
                frame = pd.read_csv(path, dtype=str, keep_default_na=False)
            except pd.errors.EmptyDataError:
                continue
            front = {(f"{key}_param" if key in frame.columns else key): value for key, value in labels.items()}
            tables.setdefault(table, []).append(pd.DataFrame(front, index=frame.index).join(frame))
    merged = out / "merged"
    if merged.exists():
        shutil.rmtree(merged)
    paths = []
    for table, frames in tables.items():
        path = merged / table
        path.parent.mkdir(parents=True, exist_ok=True)
        pd.concat(frames, ignore_index=True).to_csv(path, index=False)
        paths.append(path)
    return paths


def local_gpu_ids() -> list[str]:
    """Ids (for CUDA_VISIBLE_DEVICES) of this machine's visible GPUs; [] without any."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return []
    if sys.platform == "linux" and not (Path("/proc/driver/nvidia").exists() or Path("/dev/kfd").exists()):
        return []  # no GPU driver: skip importing torch
    import torch

    count = torch.cuda.device_count()
    if visible is not None:
        return [v.strip() for v in visible.split(",")][:count]
    return [str(k) for k in range(count)]


def kernel_threads(threads: str) -> dict[str, str]:
    """The thread settings of a CPU kernel: every BLAS the same count. A Dask worker's environment sets
    MKL_NUM_THREADS and OPENBLAS_NUM_THREADS to 1, and torch (an MKL build) takes its thread count from
    MKL_NUM_THREADS, so OMP_NUM_THREADS alone left every kernel on one core."""
    return {name: threads for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}


def _start_client(args: argparse.Namespace):
    """A Dask client: on the cluster at --scheduler, or on a new LocalCluster. Returns (client, cluster, env, gpus)."""
    import importlib.util

    from dask.distributed import Client, LocalCluster

    if args.scheduler:
        if args.workers is not None:
            print("sweep.py: --workers is ignored with --scheduler (the cluster has its own workers)", file=sys.stderr)
        try:
            return Client(args.scheduler, timeout="20s"), None, {}, []
        except (OSError, TimeoutError, ValueError) as exc:
            print(f"sweep.py: error: cannot reach the Dask scheduler at {args.scheduler}: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
    gpus = local_gpu_ids()
    workers = args.workers or len(gpus) or max(1, (os.cpu_count() or 2) // 2)
    env = {}
    if not gpus:  # share the cores among the kernels
        env = kernel_threads(os.environ.get("OMP_NUM_THREADS") or str(max(1, (os.cpu_count() or 1) // workers)))
    dashboard = ":0" if importlib.util.find_spec("bokeh") else None
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=dashboard)
    return Client(cluster), cluster, env, gpus


def _interrupt(signum, frame):
    raise KeyboardInterrupt  # SIGTERM (kill, scancel) stops a sweep as cleanly as Ctrl-C


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)
    out, stem = args.out, args.notebook.stem
    try:
        names, rows = read_index(out / "index.csv")
    except ValueError as exc:
        print(f"sweep.py: error: {exc}", file=sys.stderr)
        return 2
    names += [name for name in args.values if name not in names]
    cells = {cell_id(raw): raw for raw in grid(args.values)}
    pending = {cell: raw for cell, raw in cells.items() if rows.get(cell, {}).get("status") != "done"}
    skipped = len(cells) - len(pending)
    rows = {cell: rows.get(cell) for cell in [*rows, *pending]}  # index order: earlier rows, then this grid's
    profile = args.profile if "profile" in args.declared else None
    if not pending:
        out.mkdir(parents=True, exist_ok=True)
        write_index(out / "index.csv", names, rows)
    else:
        from dask.distributed import Event, as_completed
        from tqdm.auto import tqdm

        client, cluster, env, gpus = _start_client(args)  # before writing anything: a bad --scheduler exits 2
        env["GLAUBER_PROFILE"] = args.profile
        stop = f"sweep-stop-{uuid.uuid4().hex}"
        bar = tqdm(total=len(cells), initial=skipped, unit="cell", desc=f"{stem} ({args.profile})", file=sys.stderr)
        try:
            out.mkdir(parents=True, exist_ok=True)
            write_index(out / "index.csv", names, rows)
            futures = {
                client.submit(
                    run_cell,
                    str(args.notebook),
                    str(out / cell),
                    raw,
                    profile,
                    env,
                    gpus,
                    stop,
                    key=f"{cell}-{uuid.uuid4().hex[:8]}",
                ): cell
                for cell, raw in pending.items()
            }
            for future in as_completed(futures):
                cell = futures[future]
                if future.status == "finished":
                    result = future.result()
                else:  # the task itself broke (e.g. its worker died): still a failed cell, not a crash
                    result = {"status": "failed", "seconds": 0.0, "error": _one_line(repr(future.exception()))}
                rows[cell] = {
                    "cell": cell,
                    **pending[cell],
                    "status": result["status"],
                    "seconds": f"{result['seconds']:.1f}",
                    "error": result["error"],
                }
                write_index(out / "index.csv", names, rows)
                if result["status"] == "failed":
                    bar.write(f"failed {cell}: {result['error']}", file=sys.stderr)
                bar.update()
        except KeyboardInterrupt:
            with contextlib.suppress(Exception):
                Event(stop, client=client).set()  # running cells stop their papermill (see run_cell)
            print(
                f"\nsweep.py: interrupted; finished cells are in {out / 'index.csv'}, a rerun resumes", file=sys.stderr
            )
            return 130
        finally:
            bar.close()
            client.close()
            if cluster is not None:
                cluster.close()

    merged = merge_tables(out, stem, names, rows)
    failed = [cell for cell in cells if rows[cell]["status"] == "failed"]
    print(
        f"{len(cells)} cells: {len(cells) - len(failed)} done ({skipped} skipped as done before), "
        f"{len(failed)} failed; index {out / 'index.csv'}; {len(merged)} merged tables in {out / 'merged'}"
    )
    for cell in failed:
        print(f"  failed {cell}: {rows[cell]['error']}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
