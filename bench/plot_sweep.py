#!/usr/bin/env python3
"""Plots batch-size sweeps: `tessera bench sweep --json` and `bench/compare_torch.py --json` files
(schema tessera-sweep/1, bench/README.md), any number of them on the same axes.

    python3 bench/plot_sweep.py tessera.json [torch.json ...] --out-dir DIR

writes DIR/sweep.png (decode step time and tokens/s against batch size, one line per mode of
each file, with the weight-read roofline: the bytes of weights a step reads over the copy
bandwidth measured in the same run) and DIR/startup.png (seconds per startup stage and mode).
Needs matplotlib (Debian: python3-matplotlib). Exits 2 on a file that is not a sweep, 1 without
matplotlib.
"""
import argparse
import json
import sys
from pathlib import Path

SCHEMA = "tessera-sweep/1"
STAGES = [("load", "load_s"), ("compile, cold", "compile_cold_s"),
          ("compile, warm", "compile_warm_s"), ("capture", "capture_s")]


def fail(message, status=2):
    print(f"plot_sweep.py: {message}", file=sys.stderr)
    sys.exit(status)


def load_report(path):
    try:
        report = json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        fail(f"{path}: {error}")
    if not isinstance(report, dict) or report.get("schema") != SCHEMA:
        fail(f"{path}: not a {SCHEMA} file")
    for key in ("engine", "device", "config", "rows", "modes", "startup"):
        if key not in report:
            fail(f"{path}: no '{key}'")
    return report


def series(report, key):
    """{label: ([batch sizes], [values])} for one row field, rows with a value only."""
    lines = {}
    for row in report["rows"]:
        if row.get(key) is None:
            continue
        xs, ys = lines.setdefault(row["label"], ([], []))
        xs.append(row["batch_size"])
        ys.append(row[key])
    return lines


def roofline_ms(report):
    """The step time at which reading the weights once runs at the copy bandwidth."""
    copy, weights = report.get("copy_gb_per_s"), report.get("weight_bytes_per_step")
    if not copy or not weights:
        return None
    return weights / (copy * 1e9) * 1e3


def title_of(reports):
    first = reports[0]
    config = first["config"]
    device = first["device"].get("name") or first["device"].get("device")
    return (f"{config.get('model')} {config.get('dtype')} on {device}, context "
            f"{config.get('context')}, commit {first.get('commit', 'unknown')}")


def plot_sweep(reports, path, pyplot):
    figure, (step_axis, rate_axis) = pyplot.subplots(1, 2, figsize=(14, 5.5))
    batch_sizes = sorted({row["batch_size"] for report in reports for row in report["rows"]})
    for report in reports:
        # Tessera solid with circles, other engines dash-dotted with squares.
        style = ({"marker": "o", "linestyle": "-"} if report["engine"] == "tessera" else
                 {"marker": "s", "linestyle": "-."})
        for label, (xs, ys) in series(report, "step_ms_median").items():
            step_axis.plot(xs, ys, label=label, **style)
        for label, (xs, ys) in series(report, "tokens_per_s").items():
            rate_axis.plot(xs, ys, label=label, **style)
    roof = next((roofline_ms(r) for r in reports if roofline_ms(r)), None)
    if roof and batch_sizes:
        step_axis.axhline(roof, color="black", linestyle="--", linewidth=1,
                          label=f"weight-read roofline ({roof:.3f} ms)")
        rate_axis.plot(batch_sizes, [b / (roof * 1e-3) for b in batch_sizes], color="black",
                       linestyle="--", linewidth=1, label="weight-read roofline")
    for axis, name in ((step_axis, "decode step, median ms"), (rate_axis, "decode tokens/s")):
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xlabel("batch size (sequences)")
        axis.set_ylabel(name)
        if batch_sizes:
            axis.set_xticks(batch_sizes)
            axis.set_xticklabels([str(b) for b in batch_sizes])
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=8)
    figure.suptitle(title_of(reports), fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    pyplot.close(figure)


def plot_startup(reports, path, pyplot):
    names, values = [], {stage: [] for stage, _ in STAGES}
    for report in reports:
        load = report["startup"].get("load_s")
        for mode in report["modes"]:
            names.append(mode["label"])
            stages = mode.get("startup", {})
            for stage, key in STAGES:
                value = load if key == "load_s" else stages.get(key)
                values[stage].append(value or 0.0)
    figure, axis = pyplot.subplots(figsize=(max(7, 1.2 * len(names) + 3), 5))
    width = 0.8 / len(STAGES)
    for index, (stage, _) in enumerate(STAGES):
        positions = [i + (index - (len(STAGES) - 1) / 2) * width for i in range(len(names))]
        bars = axis.bar(positions, values[stage], width, label=stage)
        axis.bar_label(bars, labels=[f"{v:.2f}" if v else "" for v in values[stage]],
                       fontsize=7)
    axis.set_xticks(range(len(names)))
    axis.set_xticklabels(names, rotation=20, ha="right", fontsize=8)
    axis.set_ylabel("seconds")
    axis.set_title("startup per stage (a missing bar: the stage does not apply)\n" +
                   title_of(reports), fontsize=9)
    axis.grid(True, axis="y", alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    pyplot.close(figure)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="+", help="sweep JSON files")
    parser.add_argument("--out-dir", default=".", help="where the PNGs go (default .)")
    args = parser.parse_args()
    reports = [load_report(path) for path in args.reports]
    try:
        import matplotlib
    except ImportError:
        fail("needs matplotlib (Debian: apt-get install python3-matplotlib)", 1)
    matplotlib.use("Agg")
    from matplotlib import pyplot
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plot_sweep(reports, out / "sweep.png", pyplot)
    plot_startup(reports, out / "startup.png", pyplot)
    print(f"wrote {out / 'sweep.png'} and {out / 'startup.png'}")


if __name__ == "__main__":
    main()
