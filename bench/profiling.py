"""Summaries of py-spy profiles (collapsed stacks: "frame;frame;frame count"
per line, as `py-spy record --format raw` writes them), used by the benchmarks
that profile a process under load (bench/notifier_bench.py --profile).

Frames are ranked by the share of samples they appear in, and each sample is
given to the deepest layer on its stack (gunicorn, Django, DRF, our views, the
engine, redis-py), which answers "where does a request's time go".

    python -m bench.profiling FILE...     # summarize saved profiles
"""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

TOP = 40
# Where a sample's time belongs: the deepest of these layers found on its stack
# (frames are listed root first). A frame "matches" when it contains the marker.
LAYERS = (
    ("outside the WSGI app (server loop, threads)", ""),
    ("Django handler + middleware", "WSGIHandler.__call__"),
    ("DRF APIView machinery", "APIView.dispatch"),
    ("our view code (queues/api)", "(queues/api/"),
    ("engine, Python side (queues/)", "(queues/engine.py"),
    ("redis-py client", "(redis/"),
)


def _frames(path: Path):
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            yield stack.split(";"), int(count)


def _busy(frames: list[str]) -> bool:
    """Idle threads (waiting for work, a lock or a socket) are not work."""
    leaf = frames[-1]
    return not any(word in leaf for word in ("wait (threading.py", "select (selectors.py", "_worker (concurrent",
                                             "run_for_one", "sleep", "accept"))


def layer_of(frames: list[str]) -> str:
    deepest = 0
    for frame in frames:
        for index in range(deepest + 1, len(LAYERS)):
            if LAYERS[index][1] in frame:
                deepest = index
    return LAYERS[deepest][0]


def summarize(paths: list[Path]) -> str:
    inclusive: Counter[str] = Counter()
    leaf: Counter[str] = Counter()
    layers: Counter[str] = Counter()
    total = 0
    for path in paths:
        for frames, count in _frames(path):
            if not _busy(frames):
                continue
            total += count
            leaf[frames[-1]] += count
            layers[layer_of(frames)] += count
            for frame in set(frames):
                inclusive[frame] += count
    if not total:
        return "no busy samples\n"
    lines = [f"{total} busy samples from {len(paths)} file(s)", "", "by layer (self time of each layer):"]
    lines += [f"{100 * layers[name] / total:5.1f}%  {name}" for name, _ in LAYERS]
    lines += ["", "inclusive (share of busy samples):"]
    lines += [f"{100 * n / total:5.1f}%  {frame}" for frame, n in inclusive.most_common(TOP)]
    lines += ["", "self (leaf frames):"]
    lines += [f"{100 * n / total:5.1f}%  {frame}" for frame, n in leaf.most_common(TOP // 2)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(summarize([Path(p) for p in sys.argv[1:]]))
