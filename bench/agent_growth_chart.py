#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""agent_growth_chart.py - draw agent_growth's series (one file per regime) as one standalone SVG line chart:
share of the growing heap on huge pages against time.

    bench/agent_growth_chart.py OUT.svg "LABEL=FILE" ...
"""
import sys
from xml.sax.saxutils import escape

WIDTH, HEIGHT = 760, 420
LEFT, RIGHT, TOP, BOTTOM = 60, 230, 50, 50
COLORS = ["#888888", "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]


def read_series(path):
    points = []
    for line in open(path):
        fields = line.split()
        if len(fields) == 4 and not line.startswith("#"):
            points.append((float(fields[1]), float(fields[2])))
    return points


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    series = []
    for spec in sys.argv[2:]:
        label, path = spec.split("=", 1)
        series.append((label, read_series(path)))
    x_max = max(x for _, points in series for x, _ in points) or 1
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def at(x, y):
        return LEFT + plot_w * x / x_max, TOP + plot_h * (1 - y)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="system-ui, Helvetica, Arial, sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
           f'<text x="{LEFT}" y="24" font-size="15" font-weight="bold">A process growing 1 GiB over 60 s: '
           f'share of its heap on huge pages</text>']
    for tick in range(0, 11, 2):
        y = tick / 10
        _, py = at(0, y)
        out.append(f'<line x1="{LEFT}" y1="{py:.1f}" x2="{LEFT + plot_w}" y2="{py:.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{LEFT - 8}" y="{py + 4:.1f}" text-anchor="end">{tick * 10} %</text>')
    step = 10 if x_max > 30 else 5
    for x in range(0, int(x_max) + 1, step):
        px, _ = at(x, 0)
        out.append(f'<line x1="{px:.1f}" y1="{TOP + plot_h}" x2="{px:.1f}" y2="{TOP + plot_h + 5}" stroke="#444"/>')
        out.append(f'<text x="{px:.1f}" y="{TOP + plot_h + 20}" text-anchor="middle">{x} s</text>')
    out.append(f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{LEFT + plot_w}" y2="{TOP + plot_h}" stroke="#444"/>')
    out.append(f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}" stroke="#444"/>')
    for i, (label, points) in enumerate(series):
        color = COLORS[i % len(COLORS)]
        path = " ".join("%.1f,%.1f" % at(x, y) for x, y in points)
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{path}"/>')
        ly = TOP + 16 + 20 * i
        out.append(f'<line x1="{LEFT + plot_w + 14}" y1="{ly - 4}" x2="{LEFT + plot_w + 34}" y2="{ly - 4}" '
                   f'stroke="{color}" stroke-width="3"/>')
        out.append(f'<text x="{LEFT + plot_w + 40}" y="{ly}">{escape(label)}</text>')
    out.append(f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 10}" text-anchor="middle">seconds since the growth '
               f'started (measured from /proc/PID/smaps every second)</text>')
    out.append("</svg>")
    with open(sys.argv[1], "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
