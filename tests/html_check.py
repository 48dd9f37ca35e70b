#!/usr/bin/env python3
"""html_check.py [--generic] REPORT.html — structure of the HTML report of test_html's
synthetic run (tests/test_html.c --write): well-formed (every element closed, in order, by
python's html.parser), no script, no external resource, no dead link (each href="#x" has an
element of id x, and no id is given twice), the expected number of points, cells and bars in
each plot, and the hostile names of the run present only as text. --generic: only what holds
for any report (all but the plots' counts, the names and the figures)."""
import sys
from html.parser import HTMLParser

VOID = {"meta", "br", "img", "input", "link", "hr", "col", "source", "wbr", "area", "base"}


class Check(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors = [], []
        self.tags = {}
        self.svg = None  # id of the svg being read
        self.points = {}  # (svg id, data-label) -> data-points, and the real point count
        self.cells = {}  # svg id -> rect count
        self.text = []
        self.ids = {}  # id -> how many elements have it
        self.links = []  # the targets of the in-page links, href="#x"

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.attributes(tag, attrs)
        if tag == "svg":
            self.svg = a.get("id")
        self.element(tag, a)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.attributes(tag, attrs)
        self.element(tag, dict(attrs))

    def attributes(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        for k, v in attrs:
            if k.startswith("on"):
                self.errors.append("event handler attribute %s on <%s>" % (k, tag))
            if k in ("src", "href") and v and not v.startswith("#"):
                self.errors.append("external reference %s=%r" % (k, v))
            if k == "href" and v and v.startswith("#"):
                self.links.append(v[1:])
            if k == "id":
                self.ids[v] = self.ids.get(v, 0) + 1

    def element(self, tag, a):
        if tag == "polyline" and self.svg:
            pts = a.get("points", "").split()
            self.points[(self.svg, a.get("data-label"))] = (int(a.get("data-points", -1)), len(pts))
        if tag == "rect" and self.svg:
            self.cells[(self.svg, a.get("class"))] = self.cells.get((self.svg, a.get("class")), 0) + 1

    def handle_endtag(self, tag):
        if tag == "svg":
            self.svg = None
        if not self.stack or self.stack[-1] != tag:
            self.errors.append("</%s> at %s does not close <%s>" % (tag, self.getpos(),
                                                                   self.stack[-1] if self.stack else None))
            if tag in self.stack:
                while self.stack.pop() != tag:
                    pass
        else:
            self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def test_run(c, html, expect):
    """What test_html's run (--write) shows: its plots' counts, names and figures."""
    for label in ("rank 0", "rank 1"):
        expect(c.points.get(("step-time", label)) == (4, 4),
               "step-time %s: %s points, expected 4" % (label, c.points.get(("step-time", label))))
    expect(c.points.get(("nvml-0-power_w", "GPU 0")) == (12, 12),
           "power curve: %s, expected 12 points" % (c.points.get(("nvml-0-power_w", "GPU 0")),))
    expect(c.cells.get(("heatmap", "cell")) == 8, "heatmap: %s cells, expected 8" % c.cells.get(("heatmap", "cell")))
    expect(c.cells.get(("breakdown", "seg"), 0) >= 2, "breakdown: no bars")
    text = "".join(c.text)
    for hostile in ('<script>alert("k")</script>&\'gemm', "</table><img src=x onerror=alert(1)>",
                    "fwd<b>\"'", "h<i>&"):
        expect(hostile in text, "hostile name %r not shown as text" % hostile)
    for figure in ("35.000", "38.500", "50.000 ms", "AllReduce"):
        expect(figure in text, "figure %r not shown" % figure)
    # its rank 0 has kernels and a timer: the navigation links to both sections
    for target in ("kernels", "timers"):
        expect(target in c.links, "no link to #%s" % target)


def main():
    generic = len(sys.argv) > 2 and sys.argv[1] == "--generic"
    html = open(sys.argv[-1], encoding="utf-8").read()
    c = Check()
    c.feed(html)
    c.close()
    fails = list(c.errors)
    if c.stack:
        fails.append("unclosed elements: %s" % c.stack)
    expect = lambda cond, msg: None if cond else fails.append(msg)
    expect(html.startswith("<!DOCTYPE html>"), "no doctype")
    expect("script" not in c.tags, "a <script> element")
    expect("img" not in c.tags and "iframe" not in c.tags, "an <img>/<iframe> element")
    expect(c.tags.get("style") == 1, "inline CSS expected once")
    expect("http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in html,
           "a network URL")
    # in-page links: each has its target, and one only; the navigation alone has 7 or more
    for target in c.links:
        expect(c.ids.get(target), "dead link: href=\"#%s\", no element has id=\"%s\"" % (target, target))
    for i, n in c.ids.items():
        expect(n == 1, "id=\"%s\" on %d elements" % (i, n))
    expect(len(c.links) >= 7, "%d in-page links, expected the navigation's 7 or more" % len(c.links))
    if not generic:
        test_run(c, html, expect)
    if fails:
        for f in fails:
            print("html_check: " + f)
        return 1
    print("html_check: %d elements, %d plots, %d in-page links checked: OK" %
          (sum(c.tags.values()), len(c.points), len(c.links)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
