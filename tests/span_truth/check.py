#!/usr/bin/env python3
"""check.py TRUTH.json REPORT.json: the bounded report's span figures against truth.c's."""
import json, sys
t = json.load(open(sys.argv[1])); r = json.load(open(sys.argv[2]))
bad = 0
def cmp(what, got, want, tol=1e-6):
    global bad
    if got is None and want == 0: print(f"  n/a {what}: not captured"); return
    ok = got is not None and want is not None and abs(got - want) <= tol * max(1, abs(want))
    if not ok: bad += 1
    print(f"  {'ok ' if ok else 'BAD'} {what}: report {got} truth {want}")
for rk in r["ranks"]:
    rank = str(rk["rank"]); g = rk.get("gpu")
    if rank not in t or not g or g.get("per") != "span": continue
    tr = t[rank]
    print(f"rank {rank}: per {g.get('per')} span {tr['from_s']:.6f}-{tr['to_s']:.6f}")
    b = rk["gpu_capture"]["gpu_records_bound"]
    cmp("from_s", b["from_s"], tr["from_s"]); cmp("to_s", b["to_s"], tr["to_s"])
    for d in g.get("devices", []):
        td = tr["devices"].get(str(d["device"]))
        if not td: print(f"  BAD device {d['device']} not in truth"); bad += 1; continue
        for k in ("kernels", "kernel_ms", "memcpy_memset_ms", "h2d_bytes"):
            cmp(f"dev{d['device']}.{k}", d.get(k), td[k])
        cmp(f"dev{d['device']}.busy_share(held)", d.get("busy_share"), td["busy_share_held"])
        cmp(f"dev{d['device']}.busy_share(all)", d.get("busy_share"), td["busy_share_all"], 1e9)
    cmp("host_syncs", g.get("host_syncs"), tr["host_syncs"])
    cmp("host_sync_blocked_ms(began)", g.get("host_sync_blocked_ms"), tr["host_sync_blocked_ms"])
    cg = g.get("cuda_graphs") or {}
    if tr["graph_launches"] or cg:
        cmp("graph launches", cg.get("launches"), tr["graph_launches"])
        cmp("graph kernels", cg.get("kernels"), tr["graph_kernels"])
    ov = g.get("cupti_overhead") or {}
    if tr["overhead_records_began"] or tr["overhead_records_overlap"] or ov:
        cmp("overhead records(began)", ov.get("records"), tr["overhead_records_began"])
        cmp("overhead ms+driver_ms(began)", (ov.get("ms") or 0) + (ov.get("driver_ms") or 0), tr["overhead_ms_began"])
    for k in g.get("top_kernels", []):
        cmp(f"top {k['name'][:20]} count", k["count_per_unit"], tr["top"].get(k["name"]))
print("BAD", bad) if bad else print("all ok")
