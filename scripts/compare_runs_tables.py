"""Does a study reproduce? Two runs.csv compared by run id: every numeric column but times, speeds and
``git_dirty``, to 1e-9 relative. ``python scripts/compare_runs_tables.py REFERENCE.csv NEW.csv``"""
import sys

import pandas as pd

a, b = (pd.read_csv(p).set_index("run_id") for p in sys.argv[1:3])
common = a.index.intersection(b.index)
print(f"reference {len(a)} rows, new {len(b)} rows, {len(common)} run ids in common")
skip = ("git_dirty", "seconds", "per_second", "time", "started", "finished", "run_dir", "mfu", "flops_per_second", "_s")
worst, cols = 0.0, 0
for col in a.columns.intersection(b.columns):
    if any(s in col for s in skip) or not pd.api.types.is_numeric_dtype(a[col]):
        continue
    cols += 1
    for rid in common:
        x, y = a.at[rid, col], b.at[rid, col]
        if pd.isna(x) and pd.isna(y):
            continue
        x, y = float(x), float(y)
        rel = abs(x - y) / max(abs(x), abs(y), 1e-300)
        if rel > worst:
            worst = rel
        if rel > 1e-9:
            print("DIFF", rid, col, x, y)
print(f"{cols} numeric columns compared; largest relative difference {worst:.3g}")
sys.exit(1 if worst > 1e-9 or len(common) < len(a) else 0)
