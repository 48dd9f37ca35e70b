#!/usr/bin/env python3
"""dashboards/trainprof.json: valid JSON, a Grafana dashboard model with panels of built-in
types only (no plugin), every panel querying the Prometheus data source through the
${datasource} variable, every metric an expr (or a template variable's query) names
listed in docs/metrics.md's table, counters only under rate()/increase(), and GPU utilisation
from the busy-time counters rather than the sampled gauges. Usage: dashboard_check.py DASHBOARD.json METRICS.md"""
import json
import re
import sys

dash_path, doc_path = sys.argv[1], sys.argv[2]
dash = json.load(open(dash_path))

# metric names of the docs' tables: the backticked names of a row's first cell
documented = set()
for line in open(doc_path):
    if not line.startswith("| `"):
        continue
    first = line.split("|")[1]
    for name in re.findall(r"`([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{[^`]*\})?`", first):
        documented.add(name)
assert "trainprof_steps_total" in documented, sorted(documented)

BUILTIN = {"row", "timeseries", "heatmap", "status-history", "state-timeline", "stat",
           "gauge", "bargauge", "table", "text", "barchart", "histogram", "piechart"}
PROMQL_WORDS = {
    "sum", "avg", "min", "max", "count", "by", "without", "on", "ignoring", "group_left",
    "group_right", "rate", "irate", "increase", "delta", "idelta", "histogram_quantile",
    "scalar", "vector", "topk", "bottomk", "quantile", "stddev", "label_replace",
    "label_values", "offset", "and", "or", "unless", "bool", "abs", "clamp_min", "clamp_max",
    "avg_over_time", "max_over_time", "min_over_time", "time", "le", "job", "rank", "host",
    "gpu", "uuid", "local_rank", "instance"}


def metrics_of(expr):
    """Metric names in a PromQL expression: identifiers outside strings, label matchers,
    grouping lists and range brackets that are not PromQL words."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)           # strings
    e = re.sub(r"\{[^}]*\}", "", e)                        # label matchers
    e = re.sub(r"\[[^\]]*\]", "", e)                       # ranges
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", r"\1", e)
    names = set()
    for m in re.finditer(r"(?<![\w.$])([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()", e):
        w = m.group(1)
        if w in PROMQL_WORDS or re.fullmatch(r"\d.*|e\d+", w):
            continue
        names.add(w)
    return names


def base_name(m):
    for suffix in ("_bucket", "_count", "_sum"):
        if m.endswith(suffix) and m[: -len(suffix)] in documented:
            return m[: -len(suffix)]
    return m


assert dash.get("title") and dash.get("uid") and isinstance(dash.get("panels"), list), "not a dashboard"
assert isinstance(dash.get("schemaVersion"), int)
errors, seen, npanels = [], set(), 0
ids = [p["id"] for p in dash["panels"]]
assert len(ids) == len(set(ids)), "duplicate panel ids"
for p in dash["panels"]:
    t = p.get("type")
    if t not in BUILTIN:
        errors.append("panel %r: type %r is not a built-in panel" % (p.get("title"), t))
    if t == "row":
        continue
    npanels += 1
    gp = p.get("gridPos", {})
    if not all(k in gp for k in "xywh") or gp["x"] + gp["w"] > 24:
        errors.append("panel %r: bad gridPos %r" % (p.get("title"), gp))
    if p.get("datasource", {}).get("uid") != "${datasource}":
        errors.append("panel %r: datasource is not ${datasource}" % p.get("title"))
    targets = p.get("targets") or []
    if not targets:
        errors.append("panel %r: no query" % p.get("title"))
    for tg in targets:
        names = metrics_of(tg.get("expr", ""))
        if not names:
            errors.append("panel %r: expr %r names no metric" % (p.get("title"), tg.get("expr")))
        for n in names:
            seen.add(base_name(n))
            if base_name(n) not in documented:
                errors.append("panel %r: %s is not in %s" % (p.get("title"), n, doc_path))
for v in dash.get("templating", {}).get("list", []):
    q = v.get("query")
    q = q.get("query", "") if isinstance(q, dict) else q
    m = re.match(r"label_values\((\w+)", q or "")
    if m and m.group(1) not in documented:
        errors.append("variable %s: %s is not documented" % (v["name"], m.group(1)))
# Counters are read through rate()/increase(); utilisation through the busy-time counters:
# a gauge of a ~1 s average scraped every 15 s shows 0 or 1 on a bursty job, where the rate of
# seconds busy is the share of the whole interval
SAMPLED_GAUGES = {"trainprof_gpu_utilization_ratio": "trainprof_gpu_busy_seconds_total",
                  "trainprof_gpu_memory_utilization_ratio": "trainprof_gpu_memory_busy_seconds_total"}
busy_used = set()
for p in dash["panels"]:
    for tg in p.get("targets") or []:
        expr = tg.get("expr", "")
        for n in metrics_of(expr):
            if n.endswith("_total") and not re.search(
                    r"\b(rate|irate|increase)\(\s*%s\b" % re.escape(n), expr):
                errors.append("panel %r: counter %s outside rate()/increase()" % (p.get("title"), n))
            if n in SAMPLED_GAUGES:
                errors.append("panel %r: %s is a sampled gauge; use rate(%s)" % (
                    p.get("title"), n, SAMPLED_GAUGES[n]))
            if n in SAMPLED_GAUGES.values():
                busy_used.add(n)
for c in SAMPLED_GAUGES.values():
    if c not in busy_used:
        errors.append("no panel shows %s" % c)
titles = " ".join(p["title"].lower() for p in dash["panels"])
for need in ("throughput", "utilisation", "step time", "memory", "power", "energy per step"):
    if need not in titles:
        errors.append("no panel about %s" % need)
if errors:
    print("\n".join(errors))
    sys.exit(1)
print("dashboard ok: %d panels, %d metrics, all documented" % (npanels, len(seen)))
