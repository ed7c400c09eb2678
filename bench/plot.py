#!/usr/bin/env python3
"""Draw hk-bench's CSV as SVG bar charts (no third-party packages needed).

usage: bench/plot.py BENCH.csv OUT_DIR
Writes OUT_DIR/p1.svg (bandwidth / device-to-device copy, hk-cuda and cuBLAS,
at the largest n) and OUT_DIR/p2.svg (time per call / cuBLAS's, every n).
"""
import csv
import os
import sys
from xml.sax.saxutils import escape

W_BAR, GAP, LEFT, TOP, H = 14, 10, 60, 40, 260


def chart(title, groups, series, ymax, lines, ylabel):
    """groups: [(label, [value per series])]; series: [(name, colour)];
    lines: [(y, text)] drawn as dashed target lines."""
    gw = len(series) * W_BAR + GAP
    width = LEFT + len(groups) * gw + 160
    height = TOP + H + 130
    y = lambda v: TOP + H - min(v, ymax) / ymax * H
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="11">' % (width, height),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="20" font-size="14">%s</text>' % (LEFT, escape(title))]
    for k in range(6):
        v = ymax * k / 5
        out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>'
                   % (LEFT, LEFT + len(groups) * gw, y(v), y(v)))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%.2f</text>' % (LEFT - 4, y(v) + 4, v))
    out.append('<text x="14" y="%d" transform="rotate(-90 14 %d)" text-anchor="middle">%s</text>'
               % (TOP + H // 2, TOP + H // 2, escape(ylabel)))
    for gi, (label, values) in enumerate(groups):
        x0 = LEFT + gi * gw + GAP // 2
        for si, v in enumerate(values):
            if v is None:
                continue
            out.append('<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="%s"><title>%s %s: %.3f'
                       '</title></rect>' % (x0 + si * W_BAR, y(v), W_BAR - 2, TOP + H - y(v),
                                            series[si][1], escape(label), series[si][0], v))
        out.append('<text x="%d" y="%d" transform="rotate(45 %d %d)">%s</text>'
                   % (x0, TOP + H + 14, x0, TOP + H + 14, escape(label)))
    for v, text in lines:
        out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#c00" stroke-dasharray="4 3"/>'
                   % (LEFT, LEFT + len(groups) * gw, y(v), y(v)))
        out.append('<text x="%d" y="%.1f" fill="#c00">%s</text>'
                   % (LEFT + len(groups) * gw + 6, y(v) + 4, escape(text)))
    for si, (name, colour) in enumerate(series):
        ly = TOP + 20 + si * 16
        lx = LEFT + len(groups) * gw + 6
        out.append('<rect x="%d" y="%d" width="10" height="10" fill="%s"/>' % (lx, ly - 9, colour))
        out.append('<text x="%d" y="%d">%s</text>' % (lx + 14, ly, escape(name)))
    out.append('</svg>')
    return '\n'.join(out) + '\n'


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(sys.argv[1], newline='') as f:
        rows = list(csv.DictReader(f))
    os.makedirs(sys.argv[2], exist_ok=True)
    p1 = [r for r in rows if r['id'] == 'P1']
    if p1:
        nmax = max(p1, key=lambda r: int(r['n'].replace('2^', '')))['n']
        groups = []
        for r in p1:
            if r['n'] == nmax:
                cub = float(r['cublas']) if r['cublas'] else None
                groups.append(('%s %s' % (r['op'], r['prec']), [float(r['ratio']), cub]))
        svg = chart('P1: GB/s / device-to-device copy GB/s, n = %s (higher is better)' % nmax,
                    groups, [('hk-cuda', '#2a6fdb'), ('cuBLAS', '#999')], 1.2,
                    [(0.95, 'target 0.95')], 'ratio to copy bandwidth')
        with open(os.path.join(sys.argv[2], 'p1.svg'), 'w') as f:
            f.write(svg)
    p2 = [r for r in rows if r['id'] == 'P2']
    if p2:
        groups = [('%s %s %s' % (r['op'], r['prec'], r['n']), [float(r['ratio'])]) for r in p2]
        svg = chart('P2: time per call / cuBLAS time (lower is better)', groups,
                    [('hk-cuda / cuBLAS', '#2a6fdb')], 1.2,
                    [(1.0, 'target 1.0'), (0.6, 'dot, nrm2: 0.6')], 'time ratio')
        with open(os.path.join(sys.argv[2], 'p2.svg'), 'w') as f:
            f.write(svg)
    return 0


if __name__ == '__main__':
    sys.exit(main())
