#!/usr/bin/env python3
"""Draw hk-bench's CSV as SVG bar charts (no third-party packages needed).

usage: bench/plot.py BENCH.csv OUT_DIR
Writes one chart per figure found in the CSV into OUT_DIR:
  p1.svg  bandwidth / device-to-device copy, hk-cuda and cuBLAS, at the largest n
  p2.svg  time per call / cuBLAS's, every n
  p3.svg  host enqueue time / a raw cuLaunchKernel, hk-cuda and cuBLAS
  p4.svg  handle create and destroy time / cuBLAS's
  p5.svg  calls/s of 8 threads / 8 x one thread, hk-cuda and cuBLAS
  p6.svg  GB/s on 2 devices / 2 x one device, hk-cuda and cuBLAS
Exit status 0, 1 when the CSV cannot be read or drawn (one line on stderr),
2 on bad usage.
"""
import csv
import os
import re
import sys
from xml.sax.saxutils import escape

W_BAR, GAP, LEFT, TOP, H = 14, 10, 60, 40, 260


def chart(title, groups, series, ymax, lines, ylabel):
    """groups: [(label, [value per series])]; series: [(name, colour)];
    lines: [(y, text)] drawn as dashed target lines."""
    gw = len(series) * W_BAR + GAP
    width = max(LEFT + len(groups) * gw + 160, LEFT + 7 * len(title))  # room for the title
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


def number(text):
    """A CSV cell as a float, or None when empty or not a finite number."""
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if v == v and abs(v) != float('inf') else None


def ratio_targets(rows):
    """Target lines of the ratio column: ">=0.95" -> (0.95, 'target 0.95').
    Targets with a unit (P4's "<=20us" are on the time itself) are left out."""
    lines = []
    for r in rows:
        m = re.fullmatch(r'([<>]=)([0-9.]+)', (r.get('target') or '').strip())
        if m and (float(m.group(2)), 'target ' + m.group(2)) not in lines:
            lines.append((float(m.group(2)), 'target ' + m.group(2)))
    return lines


# The figures drawn the same way: hk-cuda's ratio beside cuBLAS's (when the
# CSV has one), every row of the figure. id -> (file, title, y label, lines).
GENERIC = {
    'P3': ('p3.svg', 'P3: host enqueue time / raw cuLaunchKernel, n = 2^12 (lower is better)',
           'time ratio', None),
    'P4': ('p4.svg', 'P4: handle create and destroy time / cuBLAS time (lower is better)',
           'time ratio', [(1.0, 'cuBLAS')]),
    'P5': ('p5.svg', 'P5: calls/s of 8 threads / 8 x one thread (higher is better)',
           'scaling ratio', None),
    'P6': ('p6.svg', 'P6: GB/s on 2 devices / 2 x one device (higher is better)',
           'scaling ratio', None),
    'P9': ('p9.svg', 'P9: host enqueue time through a movable handle / raw cuLaunchKernel, '
           'n = 2^12 (lower is better)', 'time ratio', None),
}


def generic(fid, rows):
    name, title, ylabel, lines = GENERIC[fid]
    groups = []
    for r in rows:
        label = ' '.join(x for x in (r['op'], r['prec'], r['n']) if x and x != '-')
        groups.append((label, [number(r['ratio']), number(r.get('cublas'))]))
    has_cublas = any(g[1][1] is not None for g in groups)
    series = [('hk-cuda', '#2a6fdb')] + ([('cuBLAS', '#999')] if has_cublas else [])
    groups = [(label, values[:len(series)]) for label, values in groups]
    lines = lines if lines is not None else ratio_targets(rows)
    top = max([v for _, vals in groups for v in vals if v is not None] + [x for x, _ in lines]
              + [1.0])
    return name, chart(title, groups, series, max(1.2, top * 1.1), lines, ylabel)


def draw(csv_path, out_dir):
    with open(csv_path, newline='') as f:
        rows = list(csv.DictReader(f))
    os.makedirs(out_dir, exist_ok=True)
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
        with open(os.path.join(out_dir, 'p1.svg'), 'w') as f:
            f.write(svg)
    p2 = [r for r in rows if r['id'] == 'P2']
    if p2:
        groups = [('%s %s %s' % (r['op'], r['prec'], r['n']), [float(r['ratio'])]) for r in p2]
        svg = chart('P2: time per call / cuBLAS time (lower is better)', groups,
                    [('hk-cuda / cuBLAS', '#2a6fdb')], 1.2,
                    [(1.0, 'target 1.0'), (0.6, 'dot, nrm2: 0.6')], 'time ratio')
        with open(os.path.join(out_dir, 'p2.svg'), 'w') as f:
            f.write(svg)
    for fid in sorted(GENERIC):
        fig = [r for r in rows if r['id'] == fid]
        if fig:
            name, svg = generic(fid, fig)
            with open(os.path.join(out_dir, name), 'w') as f:
                f.write(svg)


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        draw(sys.argv[1], sys.argv[2])
    except OSError as e:
        print('plot.py: %s: %s' % (e.filename or sys.argv[1], e.strerror or e), file=sys.stderr)
        return 1
    except (KeyError, ValueError, csv.Error) as e:
        print('plot.py: %s: not an hk-bench CSV: %s %s' % (sys.argv[1], type(e).__name__, e),
              file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
