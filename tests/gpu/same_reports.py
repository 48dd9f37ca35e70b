"""Whether two report.json documents are the same report, the places of their files aside
(the "dir" and "file" keys: one made from a run's summaries, the other from a copy of its
rank files). Prints True or False.

    python3 tests/gpu/same_reports.py A.json B.json
"""
import json
import sys


def strip(o):
    if isinstance(o, dict):
        return {k: strip(v) for k, v in o.items() if k not in ("dir", "file")}
    if isinstance(o, list):
        return [strip(v) for v in o]
    return o


a, b = (json.load(open(p)) for p in sys.argv[1:3])
print(strip(a) == strip(b))
