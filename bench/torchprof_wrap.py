"""Runs a training script inside torch.profiler with CPU and CUDA activities, for
bench/gpu_overhead.py: python3 torchprof_wrap.py SCRIPT [ARGS]. The trace is collected and
discarded (the cost of profiling, not of writing a file)."""
import runpy
import sys

import torch
from torch.profiler import ProfilerActivity, profile

script = sys.argv[1]
sys.argv = sys.argv[1:]
acts = [ProfilerActivity.CPU]
if torch.cuda.is_available():
    acts.append(ProfilerActivity.CUDA)
with profile(activities=acts):
    runpy.run_path(script, run_name="__main__")
