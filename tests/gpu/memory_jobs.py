"""Two small PyTorch training jobs for the memory checks (tests/gpu/memory_oom_leak.sh), run
under `trainprof run --python` with no trainprof code in them:

  memory_jobs.py grow   the batch grows by half each step until CUDA runs out of memory;
                        each step resets the allocator's peak at its start and prints
                        "step K max_allocated BYTES" at its end (what the report's peak per
                        step is checked against); the OutOfMemoryError ends the job
  memory_jobs.py leak   a fixed batch, and a list that keeps a 64 MiB tensor every step
"""
import sys

import torch

mode = sys.argv[1]
dev = torch.device("cuda")
torch.manual_seed(0)
width, depth = 8192, 8
model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(width, width),
                                                  torch.nn.GELU()) for _ in range(depth)])
model = model.to(dev, dtype=torch.bfloat16)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
kept = []
rows = 4096
for step in range(40 if mode == "leak" else 100):
    torch.cuda.reset_peak_memory_stats()
    x = torch.randn(rows, width, device=dev, dtype=torch.bfloat16)
    loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    print("step %d rows %d max_allocated %d" % (step, rows, torch.cuda.max_memory_allocated()),
          flush=True)
    if mode == "grow":
        rows = rows * 3 // 2
    else:
        kept.append(torch.empty(64 << 20, dtype=torch.uint8, device=dev))
