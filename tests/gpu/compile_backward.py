"""A torch.compile'd model trained with loss.backward() and a fused AdamW: under
`trainprof run --python` the autograd engine is trainprof's stand-in (the backward phase), and
the program must compute exactly what it computes bare. Prints each step's loss as float.hex()
so that two runs compare bit for bit, then the backward ranges the report saw."""
import sys

import torch

torch.manual_seed(0)
dev = torch.device("cuda")
net = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 512),
                          torch.nn.LayerNorm(512), torch.nn.Linear(512, 10)).to(dev)
model = torch.compile(net)
opt = torch.optim.AdamW(net.parameters(), lr=1e-3, fused=True)
g = torch.Generator(device="cpu").manual_seed(1)
for step in range(int(sys.argv[1]) if len(sys.argv) > 1 else 20):
    x = torch.randn(256, 512, generator=g).to(dev)
    y = torch.randint(0, 10, (256,), generator=g).to(dev)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    print("step", step, float(loss.item()).hex())
