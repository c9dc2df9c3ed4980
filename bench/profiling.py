"""Optional profiling of our gunicorn workers while a benchmark loads them
(`run.py --profile DIR`, needs py-spy: `pip install py-spy`).

py-spy samples only the thread holding the GIL (`--gil`): a gunicorn worker
is bound by its one GIL, so those samples are where its CPU goes (time spent
waiting for Redis or PostgreSQL is not in them). It writes collapsed stacks
("frame;frame;frame count" per line); the summary ranks frames by the share of
samples they appear in. Figures measured while
profiling are lower than without (py-spy takes CPU): use them for shares only.

    python -m bench.profiling DIR/*.txt     # summarize saved profiles again
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

SAMPLE_RATE_HZ = 200
TOP = 40


class Profiler:
    def __init__(self, out_dir: Path) -> None:
        if not shutil.which("py-spy"):
            raise SystemExit("--profile needs py-spy on PATH (pip install py-spy)")
        self.out_dir = out_dir
        out_dir.mkdir(parents=True, exist_ok=True)

    @contextmanager
    def recording(self, server, label: str, duration_s: float):
        pids = server.worker_pids()
        files = [self.out_dir / f"{label}-{pid}.txt" for pid in pids]
        recorders = [subprocess.Popen(["py-spy", "record", "--pid", str(pid), "--duration", str(int(duration_s) + 1),
                                       "--rate", str(SAMPLE_RATE_HZ), "--format", "raw", "--gil",
                                       "--output", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                     for pid, path in zip(pids, files)]
        try:
            yield
        finally:
            for recorder in recorders:
                try:
                    recorder.wait(duration_s + 30)
                except subprocess.TimeoutExpired:
                    recorder.kill()
            summary = self.out_dir / f"{label}-summary.txt"
            summary.write_text(summarize([f for f in files if f.exists()]))


def _frames(path: Path):
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            yield stack.split(";"), int(count)


def _busy(frames: list[str]) -> bool:
    """Idle threads (waiting for a connection or a lock) are not request work."""
    leaf = frames[-1]
    return not any(word in leaf for word in ("wait (threading.py", "select (selectors.py", "_worker (concurrent",
                                             "run_for_one", "sleep", "accept"))


def summarize(paths: list[Path]) -> str:
    inclusive: Counter[str] = Counter()
    leaf: Counter[str] = Counter()
    total = 0
    for path in paths:
        for frames, count in _frames(path):
            if not _busy(frames):
                continue
            total += count
            leaf[frames[-1]] += count
            for frame in set(frames):
                inclusive[frame] += count
    if not total:
        return "no busy samples\n"
    lines = [f"{total} busy samples from {len(paths)} worker(s)", "", "inclusive (share of busy samples):"]
    lines += [f"{100 * n / total:5.1f}%  {frame}" for frame, n in inclusive.most_common(TOP)]
    lines += ["", "self (leaf frames):"]
    lines += [f"{100 * n / total:5.1f}%  {frame}" for frame, n in leaf.most_common(TOP // 2)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(summarize([Path(p) for p in sys.argv[1:]]))
