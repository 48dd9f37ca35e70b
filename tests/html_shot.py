#!/usr/bin/env python3
"""html_shot.py REPORT.html BROWSER TMPDIR — the heatmap of the HTML report of test_html's
30,000-step run (tests/test_html.c --write-long), as headless Chromium paints it.

The heatmap's <svg> is cut out of the report into a page of its own that keeps the report's
CSS, so it is painted as in the report, but at the top left corner: its place in the full
page moves with every section above it (findings, tables, the step chart), and the page has
no script to ask the browser where it is. The svg's width equals its viewBox width, so at a
device scale factor of 1 a cell's x, y, width and height (its <rect> attributes) are its
pixels in the screenshot. The PNG is decoded here with zlib (8-bit RGB or RGBA, not
interlaced: what Chromium writes).

Asserted, on the luma of the pixels inside each cell (an inset of 1 px keeps the
anti-aliased edges out):
  - located: each cell's painted colour is its fill attribute (within 3 per channel), so
    the pixels measured are the heatmap's;
  - structure: the standard deviation of the columns' luma (the mean over the ranks) is at
    least STD_FLOOR; a heatmap of one colour, blank or uniform, has 0;
  - the slow stretch: the mean luma of its columns (steps 12,001-18,000: columns 48-71 of
    250 steps) is below that of the other columns by at least SLOW_FLOOR (darker: slower).
Luma Y' = 0.2126 R' + 0.7152 G' + 0.0722 B' (ITU-R BT.709-6, item 3.2) on the 0-255 values.
The heatmap's ramp runs from rgb(255,245,200) (luma 243.9) to rgb(180,20,20) (54.0): the
floors are about a tenth and a fifth of its 190.
"""
import math
import os
import re
import struct
import subprocess
import sys
import zlib
from html.parser import HTMLParser

STD_FLOOR = 20.0
SLOW_FLOOR = 40.0
STEPS_PER_COLUMN, COLUMNS, RANKS = 250, 120, 2
SLOW_COLUMNS = range((12001 - 1) // STEPS_PER_COLUMN, 18000 // STEPS_PER_COLUMN)  # 48..71


def luma(rgb):
    return 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def read_png(path):
    """(width, height, rows): rows[y][x] = (r, g, b). The chunks, the zlib stream and the five
    filter types as the PNG Specification (Second Edition, W3C Recommendation, 2003) lays them
    out, sections 5, 10 and 9."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("%s: not a PNG" % path)
    pos, idat, ihdr = 8, [], None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    w, h, depth, ctype, _, _, interlace = ihdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise ValueError("%s: PNG depth %d colour type %d interlace %d not handled" %
                         (path, depth, ctype, interlace))
    bpp = 3 if ctype == 2 else 4
    raw, stride = zlib.decompress(b"".join(idat)), w * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(h):
        ftype, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if ftype == 1:
                line[x] = (line[x] + a) & 255
            elif ftype == 2:
                line[x] = (line[x] + b) & 255
            elif ftype == 3:
                line[x] = (line[x] + ((a + b) >> 1)) & 255
            elif ftype == 4:
                line[x] = (line[x] + paeth(a, b, c)) & 255
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, bpp)])
        prev = line
    return w, h, rows


class Cells(HTMLParser):
    """The heatmap's cells: (rank row, column, x, y, width, height, fill (r, g, b))."""

    def __init__(self):
        super().__init__()
        self.cells, self.svg = [], {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg":
            self.svg = a
        if tag == "rect" and a.get("class") == "cell":
            fill = tuple(int(v) for v in re.fullmatch(r"rgb\((\d+),(\d+),(\d+)\)", a["fill"]).groups())
            self.cells.append([float(a["x"]), float(a["y"]), float(a["width"]), float(a["height"]), fill])


def main():
    report, browser, tmp = sys.argv[1:4]
    html = open(report, encoding="utf-8").read()
    style = re.search(r"<style>(.*?)</style>", html, re.S)
    svg = re.search(r'<svg class="chart" id="heatmap".*?</svg>', html, re.S)
    if not style or not svg:
        print("html_shot: FAIL: the report has no %s" % ("<style>" if not style else "heatmap svg"))
        return 1
    page = os.path.join(tmp, "heatmap.html")
    with open(page, "w", encoding="utf-8") as f:
        f.write('<!DOCTYPE html>\n<html><head><meta charset="utf-8"><style>%s</style>'
                "<style>body{margin:0;padding:0;max-width:none}svg.chart{margin:0;border:0}</style>"
                "</head><body>%s</body></html>\n" % (style.group(1), svg.group(0)))
    p = Cells()
    p.feed(svg.group(0))
    width, height = int(p.svg["width"]), int(p.svg["height"])
    fails = []
    if (p.svg.get("data-columns"), p.svg.get("data-steps-per-column")) != (str(COLUMNS), str(STEPS_PER_COLUMN)):
        fails.append("heatmap of %s columns of %s steps, expected %d of %d" %
                     (p.svg.get("data-columns"), p.svg.get("data-steps-per-column"), COLUMNS, STEPS_PER_COLUMN))
    if len(p.cells) != COLUMNS * RANKS:
        fails.append("%d cells, expected %d" % (len(p.cells), COLUMNS * RANKS))
    if fails:
        print("\n".join("html_shot: FAIL: " + m for m in fails))
        return 1

    shot = os.path.join(tmp, "heatmap.png")
    cmd = [browser, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
           "--disable-extensions", "--hide-scrollbars", "--force-device-scale-factor=1",
           "--user-data-dir=" + os.path.join(tmp, "profile-shot"),
           # headless Chromium's viewport is its window less the height of a browser's bars
           # (about 90 px), though the screenshot is the window's size
           "--window-size=%d,%d" % (width + 40, height + 300), "--screenshot=" + shot, "file://" + page]
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
    if not os.path.exists(shot) or not os.path.getsize(shot):
        sys.stdout.write(r.stderr.decode(errors="replace"))
        print("html_shot: FAIL: no screenshot")
        return 1
    pw, ph, px = read_png(shot)
    if pw < width or ph < height:
        print("html_shot: FAIL: screenshot %dx%d smaller than the heatmap's %dx%d" % (pw, ph, width, height))
        return 1

    # the cells in order: rank 0's columns, then rank 1's
    col_luma = [[] for _ in range(COLUMNS)]
    for k, (x, y, w, h, fill) in enumerate(p.cells):
        # the whole pixels of the cell, less 1 on each side
        x0, x1 = math.ceil(x) + 1, math.floor(x + w) - 1
        y0, y1 = math.ceil(y) + 1, math.floor(y + h) - 1
        pix = [px[yy][xx] for yy in range(y0, y1) for xx in range(x0, x1)]
        if not pix:
            fails.append("cell %d (x %.2f, width %.2f) has no inner pixel" % (k, x, w))
            continue
        mean = tuple(sum(c[i] for c in pix) / len(pix) for i in range(3))
        if max(abs(mean[i] - fill[i]) for i in range(3)) > 3:
            fails.append("cell %d painted rgb(%.0f,%.0f,%.0f), its fill is rgb%s: the heatmap is not "
                         "where its rects say" % (k, mean[0], mean[1], mean[2], fill))
        col_luma[k % COLUMNS].append(luma(mean))
    if fails:
        print("\n".join("html_shot: FAIL: " + m for m in fails[:5]))
        return 1
    cols = [sum(v) / len(v) for v in col_luma]
    mean = sum(cols) / len(cols)
    std = (sum((c - mean) ** 2 for c in cols) / len(cols)) ** 0.5
    slow = [cols[c] for c in SLOW_COLUMNS]
    rest = [cols[c] for c in range(COLUMNS) if c not in SLOW_COLUMNS]
    diff = sum(rest) / len(rest) - sum(slow) / len(slow)
    print("html_shot: %dx%d screenshot; column luma %.1f to %.1f, standard deviation %.1f (floor %.0f); "
          "slow stretch %.1f, the rest %.1f: %.1f darker (floor %.0f)" %
          (pw, ph, min(cols), max(cols), std, STD_FLOOR, sum(slow) / len(slow), sum(rest) / len(rest),
           diff, SLOW_FLOOR))
    if std < STD_FLOOR:
        fails.append("the heatmap shows no structure: column luma standard deviation %.1f < %.0f" %
                     (std, STD_FLOOR))
    if diff < SLOW_FLOOR:
        fails.append("the slow stretch (steps 12001-18000) is not visibly darker: %.1f < %.0f" %
                     (diff, SLOW_FLOOR))
    if fails:
        print("\n".join("html_shot: FAIL: " + m for m in fails))
        return 1
    print("html_shot: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
