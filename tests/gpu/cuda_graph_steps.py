"""A training step captured once in a CUDA graph and replayed (PyTorch's CUDA graphs
documentation, "whole network capture"): three eager warm-up iterations on a side stream,
one capture of forward, backward and optimizer step, then REPLAYS replays fed through static
tensors, the loss read every 10 iterations. Run under `trainprof run --python`: each replay
must be one step. Prints the replays' count and torch.profiler-free timings for the check."""
import os
import time

import torch

REPLAYS = int(os.environ.get("REPLAYS", "30"))
torch.manual_seed(0)
dev = torch.device("cuda")
net = torch.nn.Sequential(torch.nn.Linear(2048, 4096), torch.nn.GELU(),
                          torch.nn.Linear(4096, 2048), torch.nn.LayerNorm(2048),
                          torch.nn.Linear(2048, 512)).to(dev)
opt = torch.optim.SGD(net.parameters(), lr=1e-3, momentum=0.9)
x_in = torch.randn(1024, 2048, device=dev)
y_in = torch.randn(1024, 512, device=dev)

side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(net(x_in), y_in).backward()
        opt.step()
torch.cuda.current_stream().wait_stream(side)

graph = torch.cuda.CUDAGraph()
opt.zero_grad(set_to_none=True)
with torch.cuda.graph(graph):
    loss = torch.nn.functional.mse_loss(net(x_in), y_in)
    loss.backward()
    opt.step()

batches = [(torch.randn(1024, 2048, device=dev), torch.randn(1024, 512, device=dev))
           for _ in range(REPLAYS)]
torch.cuda.synchronize()
t0 = time.perf_counter()
for i, (x, y) in enumerate(batches):
    x_in.copy_(x)
    y_in.copy_(y)
    graph.replay()
    if i % 10 == 9:
        print("replay %d loss %.4f" % (i + 1, loss.item()))
torch.cuda.synchronize()
print("replays %d, %.3f ms per replay (host loop, synchronised at the end)"
      % (REPLAYS, (time.perf_counter() - t0) * 1e3 / REPLAYS))
