#!/usr/bin/env python3
"""A GPT-style decoder-only language-model trainer in plain PyTorch: trainprof's real workload.

It exists so that trainprof has a real training job to profile on a laptop CPU and on a GPU
server alike, with the shape engineers actually run: pre-LayerNorm transformer blocks,
causal self-attention, a GELU MLP, tied embeddings, AdamW, bf16 autocast on GPU, data through
a torch.utils.data.DataLoader, and (when started with several ranks) DistributedDataParallel.
The same file runs unchanged on CPU and GPU, with torch 1.13 and torch 2.x.

Each step, and its data loading (the DataLoader fetch and the copy to the device), forward,
backward and optimizer phases, are marked with NVTX ranges named exactly "step", "data",
"forward", "backward" and "optimizer" when CUDA is present (torch.cuda.nvtx); on a CPU-only
torch the marks are a no-op (trainprof's Python module adds a zero-code-change path).

Usage:
  python3 examples/pytorch/train_gpt.py                    # gpt2-small on GPU, tiny on CPU
  python3 examples/pytorch/train_gpt.py --model tiny --steps 20 --device cpu
  trainprof run -- python3 examples/pytorch/train_gpt.py
  torchrun --nproc_per_node=2 examples/pytorch/train_gpt.py          # DDP (torch 2.x)

Distributed: when WORLD_SIZE > 1 the script initialises torch.distributed from the usual
variables (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), with NCCL on GPU (one GPU
per rank, LOCAL_RANK selects it) and gloo on CPU, wraps the model in DistributedDataParallel
and gives each rank its own share of the data through a DistributedSampler.

torch 1.13's torchrun fails on Python 3.11 (AttributeError in `to_map(redirects)`), which is
what Debian 12's python3-torch gives you. On old torch start the ranks by hand instead, with
the variables torchrun would set:

  export MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 WORLD_SIZE=2
  RANK=1 LOCAL_RANK=1 python3 train_gpt.py --device cpu & RANK=0 LOCAL_RANK=0 python3 train_gpt.py --device cpu; wait
"""

import argparse
import contextlib
import inspect
import math
import os
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # a clear line rather than a traceback
    sys.exit("train_gpt.py: PyTorch is needed (%s); on Debian: apt-get install python3-torch "
             "and run it with /usr/bin/python3" % e)

PRESETS = {
    # name: (layers, hidden, heads, seq_len, vocab)
    "gpt2-small": (12, 768, 12, 1024, 50257),
    "tiny": (2, 64, 4, 64, 256),
}
TEXT_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "sonnets.txt")
MARKOV_SUCCESSORS = 8  # synthetic data: each token has this many possible successors


# ------------------------------------------------------------------------------ options

def positive_int(s):
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not an integer" % s)
    if v < 1:
        raise argparse.ArgumentTypeError("%d must be at least 1" % v)
    return v


def nonneg_int(s):
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not an integer" % s)
    if v < 0:
        raise argparse.ArgumentTypeError("%d must not be negative" % v)
    return v


def positive_float(s):
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a number" % s)
    if not (v > 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError("%r must be a positive number" % s)
    return v


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="Train a GPT-style decoder-only language model (trainprof's PyTorch example). "
                    "Defaults marked GPU/CPU depend on the device chosen.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", choices=sorted(PRESETS), default=None,
                   help="size preset: gpt2-small (12 layers, 768 hidden, 12 heads, 1024 context, "
                        "50257 vocab; GPU default) or tiny (2, 64, 4, 64, 256; CPU default); "
                        "--layers/--hidden/--heads/--seq-len/--vocab override its fields")
    p.add_argument("--layers", type=positive_int, default=None, help="transformer blocks")
    p.add_argument("--hidden", type=positive_int, default=None, help="model width")
    p.add_argument("--heads", type=positive_int, default=None, help="attention heads (divide --hidden)")
    p.add_argument("--seq-len", type=positive_int, default=None, help="context length in tokens")
    p.add_argument("--vocab", type=positive_int, default=None,
                   help="vocabulary size (--data text needs at least 256 and defaults to 256)")
    p.add_argument("--data", choices=("synthetic", "text"), default=None,
                   help="synthetic: random tokens from a fixed random Markov chain (%d successors "
                        "per token, Zipf-skewed frequencies, so there is something to learn); "
                        "text: the bytes of a text file as tokens. Default: synthetic on GPU, "
                        "text on CPU" % MARKOV_SUCCESSORS)
    p.add_argument("--text-file", default=TEXT_FILE, help="the text for --data text")
    p.add_argument("--batch-size", type=positive_int, default=None,
                   help="sequences per step per rank (default 8 on GPU, 16 on CPU)")
    p.add_argument("--steps", type=positive_int, default=None,
                   help="optimizer steps (default 50 on GPU, 30 on CPU)")
    p.add_argument("--lr", type=positive_float, default=None,
                   help="AdamW learning rate (default 6e-4 for gpt2-small, 3e-3 otherwise)")
    p.add_argument("--weight-decay", type=float, default=0.1, help="AdamW weight decay (matrices only)")
    p.add_argument("--grad-clip", type=float, default=1.0, help="gradient-norm clip (0: off)")
    p.add_argument("--seed", type=int, default=1234, help="seed for weights and data")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="auto: cuda when a GPU is usable, else cpu")
    p.add_argument("--num-workers", type=nonneg_int, default=None,
                   help="DataLoader worker processes (default 2 on GPU, 0 on CPU)")
    p.add_argument("--log-every", type=positive_int, default=10, help="print the loss every N steps")
    p.add_argument("--torch-profiler", metavar="A:B", default=None,
                   help="cross-check: run steps A..B-1 under torch.profiler (CUDA activity) and print "
                        "their summed kernel time per step")
    p.add_argument("--energy-check", action="store_true",
                   help="cross-check: read the GPU's NVML energy counter (pynvml) after step 0 and after "
                        "the last step, and print the energy per step between them")
    p.add_argument("--attention", choices=("auto", "sdpa", "manual"), default="auto",
                   help="auto: F.scaled_dot_product_attention when this torch has it (2.0+), "
                        "else a masked softmax")
    p.add_argument("--slow-rank", type=int, default=-1, metavar="R",
                   help="demonstration: rank R sleeps --slow-ms in each step's data loading, "
                        "a straggler the report must name")
    p.add_argument("--slow-ms", type=positive_float, default=20.0, help="the straggler's extra sleep per step")
    p.add_argument("--nvtx", choices=("auto", "on", "off"), default="auto",
                   help="NVTX ranges for step/data/forward/backward/optimizer; auto: when CUDA is present")
    return p, p.parse_args(argv)


def resolve(parser, a):
    """Fills the device-dependent defaults and checks the combination; errors go through argparse."""
    if a.device == "auto":
        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    elif a.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no usable GPU (torch %s, CUDA build: %s)"
                     % (torch.__version__, torch.version.cuda or "no"))
    gpu = a.device == "cuda"
    if a.model is None:
        a.model = "gpt2-small" if gpu else "tiny"
    layers, hidden, heads, seq_len, vocab = PRESETS[a.model]
    a.layers = a.layers or layers
    a.hidden = a.hidden or hidden
    a.heads = a.heads or heads
    a.seq_len = a.seq_len or seq_len
    if a.data is None:
        a.data = "synthetic" if gpu else "text"
    if a.data == "text":
        if a.vocab is None:
            a.vocab = 256
        elif a.vocab < 256:
            parser.error("--data text uses bytes as tokens: --vocab must be at least 256, not %d" % a.vocab)
    a.vocab = a.vocab or vocab
    if a.hidden % a.heads:
        parser.error("--hidden %d is not a multiple of --heads %d" % (a.hidden, a.heads))
    if a.batch_size is None:
        a.batch_size = 8 if gpu else 16
    if a.steps is None:
        a.steps = 50 if gpu else 30
    if a.lr is None:
        a.lr = 6e-4 if a.model == "gpt2-small" else 3e-3
    if a.num_workers is None:
        a.num_workers = 2 if gpu else 0
    if a.attention == "sdpa" and not hasattr(F, "scaled_dot_product_attention"):
        parser.error("--attention sdpa: torch %s has no scaled_dot_product_attention (2.0+)" % torch.__version__)
    if a.attention == "auto":
        a.attention = "sdpa" if hasattr(F, "scaled_dot_product_attention") else "manual"
    for name, v in (("--weight-decay", a.weight_decay), ("--grad-clip", a.grad_clip)):
        if not (v >= 0 and math.isfinite(v)):
            parser.error("%s must be a finite number, not negative: %r" % (name, v))
    if a.nvtx == "on" and not nvtx_usable():
        parser.error("--nvtx on: this torch (%s) has no NVTX support" % torch.__version__)
    a.use_nvtx = a.nvtx == "on" or (a.nvtx == "auto" and torch.cuda.is_available() and nvtx_usable())
    return a


# ------------------------------------------------------------------------------ NVTX

def nvtx_usable():
    """Whether this torch was built with NVTX (a CPU-only build raises on range_push). Asked
    without pushing a range, so that a profile holds only the trainer's own ranges."""
    return hasattr(torch._C, "_nvtx")


class Marks:
    """The phase marks: NVTX ranges when enabled, nothing otherwise (one predictable branch)."""

    def __init__(self, enabled):
        self.enabled = enabled
        if enabled:
            import torch.cuda.nvtx as nvtx
            self._push, self._pop = nvtx.range_push, nvtx.range_pop

    @contextlib.contextmanager
    def range(self, name):
        if not self.enabled:
            yield
            return
        self._push(name)
        try:
            yield
        finally:
            self._pop()


# ------------------------------------------------------------------------------ data

def markov_stream(vocab, ntokens, seed, chains=256):
    """Tokens from a fixed random first-order Markov chain: each token may be followed by one of
    MARKOV_SUCCESSORS tokens, chosen uniformly; the successors are drawn with Zipf weights
    (1/(id+1)), so token frequencies are skewed as in text. A model first learns the
    frequencies (the loss leaves ln(vocab) within tens of steps), then the transitions (the
    best possible loss is at most ln(MARKOV_SUCCESSORS)). Generated as `chains` independent
    walks, one vectorised step per position, so a million tokens take tens of milliseconds."""
    g = torch.Generator().manual_seed(seed)
    zipf = 1.0 / torch.arange(1, vocab + 1, dtype=torch.float64)
    table = torch.multinomial(zipf, vocab * MARKOV_SUCCESSORS, replacement=True,
                              generator=g).view(vocab, MARKOV_SUCCESSORS)
    length = -(-ntokens // chains)
    choice = torch.randint(MARKOV_SUCCESSORS, (length, chains), generator=g)
    out = torch.empty(length, chains, dtype=torch.long)
    cur = torch.randint(vocab, (chains,), generator=g)
    for i in range(length):
        out[i] = cur
        cur = table[cur, choice[i]]
    return out.t().reshape(-1)[:ntokens].contiguous()


class WindowDataset(torch.utils.data.Dataset):
    """Item i is a window of seq_len + 1 tokens of the stream at an offset fixed by the seed:
    the same items whatever the number of workers or ranks (the sampler splits them)."""

    def __init__(self, stream, seq_len, items, seed):
        if stream.numel() < seq_len + 1:
            raise ValueError("the data holds %d tokens, fewer than --seq-len + 1 = %d"
                             % (stream.numel(), seq_len + 1))
        self.stream, self.seq_len = stream, seq_len
        g = torch.Generator().manual_seed(seed + 1)
        self.offsets = torch.randint(stream.numel() - seq_len, (items,), generator=g)

    def __len__(self):
        return self.offsets.numel()

    def __getitem__(self, i):
        o = int(self.offsets[i])
        w = self.stream[o:o + self.seq_len + 1]
        return w[:-1], w[1:]


def make_loader(a, rank, world):
    if a.data == "text":
        try:
            with open(a.text_file, "rb") as f:
                raw = f.read()
        except OSError as e:
            sys.exit("train_gpt.py: --data text: cannot read %s: %s" % (a.text_file, e.strerror))
        stream = torch.tensor(list(raw), dtype=torch.long)
    else:
        stream = markov_stream(a.vocab, max(1 << 18, 4 * (a.seq_len + 1)), a.seed)
    items = a.steps * a.batch_size * world
    try:
        ds = WindowDataset(stream, a.seq_len, items, a.seed)
    except ValueError as e:
        sys.exit("train_gpt.py: --data %s: %s" % (a.data, e))
    sampler = None
    if world > 1:
        sampler = torch.utils.data.distributed.DistributedSampler(
            ds, num_replicas=world, rank=rank, shuffle=False, drop_last=True)
    kw = {}
    if a.num_workers > 0:
        kw = dict(persistent_workers=True, prefetch_factor=4)
    return torch.utils.data.DataLoader(
        ds, batch_size=a.batch_size, sampler=sampler, shuffle=False, drop_last=True,
        num_workers=a.num_workers, pin_memory=a.device == "cuda", **kw)


def batches(loader):
    """Endless iteration over the loader (a new epoch if the run outlives the data)."""
    epoch = 0
    while True:
        if hasattr(loader.sampler, "set_epoch"):
            loader.sampler.set_epoch(epoch)
        for b in loader:
            yield b
        epoch += 1


# ------------------------------------------------------------------------------ model

class CausalSelfAttention(nn.Module):
    def __init__(self, hidden, heads, impl):
        super().__init__()
        self.heads, self.impl = heads, impl
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        # The manual path's causal mask (True: a future position, hidden). A plain attribute,
        # not a buffer: DDP would broadcast a buffer, and gloo in torch 1.13 refuses bool tensors.
        self._future = None

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        # (b, t, c) -> (b, heads, t, head_dim)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        if self.impl == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))
            if self._future is None or self._future.device != x.device or self._future.size(0) < t:
                self._future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            s = s.masked_fill(self._future[:t, :t], float("-inf"))
            y = F.softmax(s.float(), dim=-1).to(v.dtype) @ v
        return self.out(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    """Pre-LayerNorm: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, hidden, heads, impl):
        super().__init__()
        self.ln_attn = nn.LayerNorm(hidden)
        self.attn = CausalSelfAttention(hidden, heads, impl)
        self.ln_mlp = nn.LayerNorm(hidden)
        self.mlp = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden))

    def forward(self, x):
        x = x + self.attn(self.ln_attn(x))
        return x + self.mlp(self.ln_mlp(x))


class GPT(nn.Module):
    def __init__(self, vocab, hidden, layers, heads, seq_len, impl):
        super().__init__()
        self.seq_len = seq_len
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(seq_len, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads, impl) for _ in range(layers))
        self.ln_out = nn.LayerNorm(hidden)
        self.apply(self._init)
        # residual-branch outputs start smaller, so the sum over 2*layers branches keeps its scale
        for blk in self.blocks:
            for lin in (blk.attn.out, blk.mlp[2]):
                nn.init.normal_(lin.weight, std=0.02 / math.sqrt(2 * layers))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx, targets):
        t = idx.size(1)
        pos = torch.arange(t, device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for blk in self.blocks:
            x = blk(x)
        logits = F.linear(self.ln_out(x), self.tok.weight)  # tied: the output head is the embedding
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))


def flops_per_token(a, params):
    """Training FLOPs per token: 6 per weight (forward 2, backward 4) over every matrix the
    token passes through (the tied output head counts; the position table is a lookup) plus
    12·layers·hidden·seq_len for the attention scores and their use (PaLM's count)."""
    matmul_params = params - a.seq_len * a.hidden
    return 6 * matmul_params + 12 * a.layers * a.hidden * a.seq_len


def make_optimizer(model, a):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": a.weight_decay},
              {"params": rest, "weight_decay": 0.0}]
    kw = {}
    if a.device == "cuda" and "fused" in inspect.signature(torch.optim.AdamW.__init__).parameters:
        kw["fused"] = True
    return torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.95), eps=1e-8, **kw)


# ------------------------------------------------------------------------------ distributed

def dist_env():
    """(rank, local_rank, world) from the torchrun variables; world 1 when not distributed."""
    def env_int(name, default=None):
        v = os.environ.get(name)
        if v is None or v == "":
            return default
        try:
            return int(v)
        except ValueError:
            sys.exit("train_gpt.py: %s=%r is not an integer" % (name, v))

    world = env_int("WORLD_SIZE", 1)
    if world <= 1:
        return 0, 0, 1
    missing = [n for n in ("RANK", "MASTER_ADDR", "MASTER_PORT") if not os.environ.get(n)]
    if missing:
        sys.exit("train_gpt.py: WORLD_SIZE=%d but %s not set (set RANK, LOCAL_RANK, WORLD_SIZE, "
                 "MASTER_ADDR and MASTER_PORT, as torchrun does)" % (world, ", ".join(missing)))
    rank = env_int("RANK")
    if not 0 <= rank < world:
        sys.exit("train_gpt.py: RANK=%d outside 0..%d" % (rank, world - 1))
    return rank, env_int("LOCAL_RANK", rank), world


def init_distributed(a, rank, local_rank, world):
    import torch.distributed as dist
    if not dist.is_available():
        sys.exit("train_gpt.py: WORLD_SIZE=%d but this torch has no torch.distributed" % world)
    kw = {}
    if a.device == "cuda":
        backend = "nccl"
        if local_rank >= torch.cuda.device_count():
            sys.exit("train_gpt.py: LOCAL_RANK=%d but only %d GPU(s) visible"
                     % (local_rank, torch.cuda.device_count()))
        torch.cuda.set_device(local_rank)
        if "device_id" in inspect.signature(dist.init_process_group).parameters:
            kw["device_id"] = torch.device("cuda", local_rank)
    else:
        backend = "gloo"
    dist.init_process_group(backend, init_method="env://", rank=rank, world_size=world, **kw)
    return dist


# ------------------------------------------------------------------------------ training

def main(argv=None):
    parser, a = parse_args(argv)
    a = resolve(parser, a)
    rank, local_rank, world = dist_env()
    tag = "[rank %d/%d] " % (rank, world) if world > 1 else ""

    def say(msg, all_ranks=False):
        if all_ranks or rank == 0:
            # one write per line, so that the lines of ranks sharing a file do not interleave
            sys.stdout.write(tag + msg + "\n")
            sys.stdout.flush()

    if a.device == "cpu" and world > 1 and "OMP_NUM_THREADS" not in os.environ:
        # ranks on one host share its cores (torchrun sets OMP_NUM_THREADS=1 for the same reason)
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, local_world)))

    dist = init_distributed(a, rank, local_rank, world) if world > 1 else None
    try:
        return train(a, rank, local_rank, world, dist, say)
    finally:
        if dist is not None and dist.is_initialized():
            dist.destroy_process_group()


def report_profiler(prof, rng, say):
    """Summed device time of the kernels torch.profiler saw (copies and memsets left out)."""
    total_us, n = 0.0, 0
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and not e.name.startswith(("Memcpy", "Memset")):
            total_us += getattr(e, "device_time", None) or e.cuda_time
            n += 1
    steps = max(1, rng[1] - rng[0])
    say("torch.profiler: %d kernels, kernel time %.4f ms per step over steps %d-%d" % (
        n, total_us / 1000.0 / steps, rng[0], rng[1] - 1), all_ranks=True)


def nvml_device(device):
    """The NVML handle of this process's CUDA device, matched by UUID."""
    import pynvml
    pynvml.nvmlInit()
    uuid = str(torch.cuda.get_device_properties(device).uuid)
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        u = pynvml.nvmlDeviceGetUUID(h)
        u = u.decode() if isinstance(u, bytes) else u
        if u.replace("GPU-", "") == uuid.replace("GPU-", ""):
            return h
    return pynvml.nvmlDeviceGetHandleByIndex(device.index or 0)


def nvml_energy_mj(h):
    import pynvml
    return pynvml.nvmlDeviceGetTotalEnergyConsumption(h)


def train(a, rank, local_rank, world, dist, say):
    device = torch.device("cuda", local_rank) if a.device == "cuda" else torch.device("cpu")
    if a.device == "cuda":
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(a.seed)  # the same initial weights on every rank (DDP broadcasts rank 0's anyway)

    model = GPT(a.vocab, a.hidden, a.layers, a.heads, a.seq_len, a.attention).to(device)
    params = sum(p.numel() for p in model.parameters())
    net = model
    if dist is not None:
        from torch.nn.parallel import DistributedDataParallel as DDP
        net = DDP(model, device_ids=[local_rank] if a.device == "cuda" else None)
        # what DDP all-reduces every step: each gradient once, in the parameters' dtype
        # (autocast leaves the parameters, hence the gradients, in float32)
        grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
        say("ddp: %d gradient bytes all-reduced per step per rank (%d tensors), bucket cap %d MiB"
            % (grad_bytes, sum(1 for p in model.parameters() if p.requires_grad), 25))
    opt = make_optimizer(model, a)
    loader = make_loader(a, rank, world)
    marks = Marks(a.use_nvtx)
    if a.device == "cuda":
        autocast = lambda: torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    else:
        autocast = contextlib.nullcontext  # fp32 on CPU

    tokens_step = a.batch_size * a.seq_len
    say("torch %s, device %s%s, %s, world %d, attention %s, nvtx %s" % (
        torch.__version__, a.device, " (%s)" % torch.cuda.get_device_name(device) if a.device == "cuda" else "",
        "bf16 autocast" if a.device == "cuda" else "fp32", world, a.attention, "on" if marks.enabled else "off"))
    say("model %s: %d layers, hidden %d, heads %d, seq_len %d, vocab %d, %.2fM parameters; "
        "data %s, batch %d/rank, %d tokens/step/rank, %.3g model FLOPs/step/rank; lr %g, %d steps, %d workers"
        % (a.model, a.layers, a.hidden, a.heads, a.seq_len, a.vocab, params / 1e6, a.data, a.batch_size,
           tokens_step, flops_per_token(a, params) * tokens_step, a.lr, a.steps, a.num_workers))

    def sync():
        if a.device == "cuda":
            torch.cuda.synchronize(device)

    it = batches(loader)
    first_loss = last_loss = None
    t_first_end = None
    prof, prof_range = None, None
    if a.torch_profiler and a.device == "cuda":
        lo, hi = (int(v) for v in a.torch_profiler.split(":"))
        prof_range = (lo, hi)
    elif a.torch_profiler:
        say("--torch-profiler counts CUDA kernels: ignored on %s" % a.device)
    nvml_handle, energy0 = None, None
    for step in range(a.steps):
        if prof_range and step == prof_range[0]:
            from torch.profiler import ProfilerActivity, profile
            sync()
            prof = profile(activities=[ProfilerActivity.CUDA])
            prof.__enter__()
        if prof is not None and step == prof_range[1]:
            sync()
            prof.__exit__(None, None, None)
            report_profiler(prof, prof_range, say)
            prof = None
        with marks.range("step"):
            with marks.range("data"):
                if rank == a.slow_rank:
                    time.sleep(a.slow_ms / 1000.0)
                x, y = next(it)
                x = x.to(device, non_blocking=True)
                y = y.to(device, non_blocking=True)
            with marks.range("forward"):
                with autocast():
                    loss = net(x, y)
            with marks.range("backward"):
                loss.backward()
            with marks.range("optimizer"):
                if a.grad_clip > 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
                opt.step()
                opt.zero_grad(set_to_none=True)
        last = step == a.steps - 1
        if step == 0 or last or step % a.log_every == 0:
            last_loss = loss.item()  # synchronises the device; only on logged steps
            if first_loss is None:
                first_loss = last_loss
            say("step %d loss %.4f" % (step, last_loss), all_ranks=True)
        if step == 0:
            sync()
            t_first_end = time.perf_counter()
            if a.energy_check and a.device == "cuda":
                nvml_handle = nvml_device(device)
                energy0 = nvml_energy_mj(nvml_handle)
    sync()
    if prof is not None:
        prof.__exit__(None, None, None)
        report_profiler(prof, (prof_range[0], a.steps), say)
    if energy0 is not None and a.steps > 1:
        joules = (nvml_energy_mj(nvml_handle) - energy0) / 1000.0
        say("nvml counter: %.3f J per step over steps 1-%d (%.1f J in total)" % (
            joules / (a.steps - 1), a.steps - 1, joules), all_ranks=True)
    elapsed = time.perf_counter() - t_first_end
    timed = a.steps - 1
    if timed > 0:
        step_ms = 1e3 * elapsed / timed
        tps = tokens_step * timed / elapsed
        timing = "mean step %.2f ms over steps 1-%d, %.0f tokens/s (this rank), %.0f tokens/s (all ranks)" % (
            step_ms, a.steps - 1, tps, tps * world)
    else:
        timing = "mean step n/a (one step only: the first is warm-up)"
    say("summary: %s, final loss %.4f (initial %.4f)" % (timing, last_loss, first_loss), all_ranks=True)
    # the exact value (float32 through float.hex), for comparisons of two runs bit for bit
    say("final loss exact %s" % float(last_loss).hex(), all_ranks=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
