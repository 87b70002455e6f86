"""The benchmarks' figures (`--plot FILE.svg`): grouped bars and lines, written as SVG with matplotlib.

matplotlib is the optional extra `plot` (`pip install "frontier-crawl[plot]"`); it is imported only when a
figure is drawn, so a benchmark run without `--plot` never needs it. Each figure carries its command and the
machine in a footer, so a picture in the docs says what produced it.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

WIDTH_IN, HEIGHT_IN = 8.0, 4.5


def footer(command: str) -> str:
    """The figure's small print: the command and the machine it ran on."""
    return (f"{command}\n{os.cpu_count()} CPUs, {platform.machine()}, Python {platform.python_version()}, "
            f"load average {os.getloadavg()[0]:.1f}")


def _figure() -> tuple[Any, Any]:
    try:
        import matplotlib
    except ImportError as exc:
        raise SystemExit('--plot needs matplotlib: pip install "frontier-crawl[plot]"') from exc
    matplotlib.use("svg")  # no display: the Agg-free SVG backend writes the file
    from matplotlib import pyplot as plt

    plt.rcParams["svg.hashsalt"] = "frontier"  # stable ids: the same figure gives the same file
    plt.rcParams["svg.fonttype"] = "none"  # text stays text: smaller files, searchable, the reader's fonts
    return plt.subplots(figsize=(WIDTH_IN, HEIGHT_IN))


def _save(fig: Any, ax: Any, path: Path, title: str, ylabel: str, command: str) -> Path:
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(frameon=False, fontsize="small")
    fig.text(0.01, 0.01, footer(command), fontsize=7, color="0.35", va="bottom")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="svg", metadata={"Date": None})
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


def bars(path: Path, groups: Sequence[str], series: Mapping[str, Sequence[float]], *, title: str, ylabel: str,
         command: str) -> Path:
    """Grouped bars: one group per `groups` entry, one bar per series in each (series values in group order)."""
    fig, ax = _figure()
    width = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series.items()):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        drawn = ax.bar(xs, values, width, label=name)
        ax.bar_label(drawn, fmt="%.3g", fontsize=7, padding=2)
    ax.set_xticks(range(len(groups)), groups)
    ax.margins(y=0.15)
    return _save(fig, ax, path, title, ylabel, command)


def lines(path: Path, series: Mapping[str, tuple[Sequence[float], Sequence[float]]], *, title: str, xlabel: str,
          ylabel: str, command: str, logx: bool = False) -> Path:
    """One line with markers per series, each given as (xs, ys); `logx` for sizes over decades."""
    fig, ax = _figure()
    for name, (xs, ys) in series.items():
        ax.plot(xs, ys, marker="o", markersize=3, label=name)
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylim(bottom=0)
    return _save(fig, ax, path, title, ylabel, command)
