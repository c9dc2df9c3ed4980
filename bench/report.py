"""One figure per line: ours beside the baseline measured in the same run, the
ratio, the target and whether it is met; printed as a table, saved as JSON."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class Figure:
    benchmark: str          # e.g. "1 publish"
    metric: str             # e.g. "req/s"
    ours: float
    baseline: float | None
    baseline_name: str      # what the baseline is, e.g. "floor app"
    target: str = "-"       # e.g. ">= 0.9x baseline"
    met: bool | None = None
    notes: str = ""
    details: dict = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if self.baseline in (None, 0):
            return None
        return self.ours / self.baseline

    def as_dict(self) -> dict:
        ratio = self.ratio
        return {**asdict(self), "ratio": None if ratio is None else round(ratio, 3)}


def fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def fmt_met(met: bool | None) -> str:
    return {True: "yes", False: "NO", None: "-"}[met]


COLUMNS = ("benchmark", "metric", "ours", "baseline", "ratio", "target", "met")


def rows(figures: list[Figure]) -> list[tuple[str, ...]]:
    return [(f.benchmark, f.metric, fmt(f.ours), f"{fmt(f.baseline)} ({f.baseline_name})" if f.baseline is not None
             else f"- ({f.baseline_name})" if f.baseline_name else "-",
             "-" if f.ratio is None else f"{f.ratio:.2f}x", f.target, fmt_met(f.met)) for f in figures]


def table(figures: list[Figure]) -> str:
    lines = [COLUMNS, *rows(figures)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(COLUMNS))]
    out = []
    for index, line in enumerate(lines):
        out.append("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip())
        if index == 0:
            out.append("  ".join("-" * width for width in widths))
    notes = [f"  {f.benchmark} / {f.metric}: {f.notes}" for f in figures if f.notes]
    return "\n".join(out + (["", "notes:", *notes] if notes else []))


def save_json(path: Path, figures: list[Figure], run_info: dict) -> None:
    path.write_text(json.dumps({**run_info, "figures": [f.as_dict() for f in figures]}, indent=2) + "\n")
