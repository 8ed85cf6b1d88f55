#!/usr/bin/env python3
"""The batch-size sweep of `tessera bench sweep`, run on transformers: the same weights, batch
sizes, context and step definition, written in the same JSON schema (tessera-sweep/1, see
bench/README.md) for bench/plot_sweep.py. Run ON THE GPU MACHINE (torch with CUDA, transformers):

    python3 bench/compare_torch.py --make-model /tmp/hf_models/llama-1b
    python3 bench/compare_torch.py --model /tmp/hf_models/llama-1b --json torch.json [...]
    python3 bench/compare_torch.py --shape qwen3-30b-a3b --experts-implementation grouped_mm [...]

--make-model saves the Llama-3.2-1B shape with seeded random weights in bf16 (the
`llama-3.2-1b-shape` config and make_model of tests/hf_reference/compare_gpu.py), so that Tessera
loads the very same folder (`tessera bench sweep --model DIR`); --model measures a saved folder;
--shape builds a shape of SHAPES in memory on the device with transformers' own random
initialization (no folder: Qwen3-30B-A3B is 61 GB in bf16), beside Tessera's synthetic model of
that name (other random weights: a decode step's cost does not depend on their values, and each
token still chooses num_experts_per_tok experts). --experts-implementation picks transformers'
experts backend of a mixture of experts (eager: a Python loop over the experts with tokens, which
torch.compile cannot trace whole; batched_mm; grouped_mm).
Modes:
  eager    transformers as it comes (sdpa attention, a DynamicCache);
  compile  a StaticCache and the decode step under torch.compile(mode="reduce-overhead",
           fullgraph=True), i.e. CUDA graphs (transformers' static-cache recipe; its prefill
           runs uncompiled, so prefill and TTFT are given for eager only).
A decode step is one token for each of B sequences holding --context tokens: the forward, the
greedy pick (argmax on the device) and the ids copied to the host, fed back as the next tokens;
timed with CUDA events, median and p90 of --steps after --warmup. Prefill: B prompts of
--prompt-len, at most --max-num-batched-tokens tokens per forward (whole prompts), timed like
Tessera's (runs filling 3 budgets of tokens, at least one, after one step's worth of warm-up).
Startup: loading the folder; the first compiled call at the first batch size less a step, with
empty inductor/triton caches (cold), then again after torch._dynamo.reset() (warm). The JSON is
rewritten after every row, so a run cut short leaves what it measured.
"""
import argparse
import inspect
import json
import math
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCHEMA = "tessera-sweep/1"
MODES = ("eager", "compile")
LABELS = {"eager": "transformers eager", "compile": "transformers compile"}
PREFILL_STEPS = 3  # as Tessera's sweep: timed prefills fill 3 budgets of tokens
TTFT_RUNS = 5


def percentile(values, p):
    """Linear interpolation between the nearest ranks, as numpy and Tessera's sweep do."""
    ordered = sorted(values)
    rank = p / 100 * (len(ordered) - 1)
    below = math.floor(rank)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (rank - below)


def integers(text):
    values = [int(part) for part in text.split(",")]
    if any(value < 1 for value in values) or len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"'{text}': positive integers, each once")
    return values


def machine_info():
    cpu, memory_gib = "", 0.0
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory_gib = int(line.split()[1]) * 1024 / 2**30
    except OSError:
        pass
    uname = platform.uname()
    return {"hostname": socket.gethostname(), "cpu": cpu, "cores": os.cpu_count(),
            "memory_gib": memory_gib, "os": f"{uname.system} {uname.release} {uname.machine}"}


def source_commit():
    if os.environ.get("TESSERA_COMMIT"):
        return os.environ["TESSERA_COMMIT"]
    try:
        done = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty",
                               "--abbrev=12"], capture_output=True, text=True, timeout=10)
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    return "unknown"


# Configs of shapes built in memory (--shape): transformers' config.json fields, as Tessera's
# synthetic model of the same name (models/loaders/synthetic.cpp).
SHAPES = {
    "qwen3-30b-a3b": {
        "model_type": "qwen3_moe", "hidden_size": 2048, "num_hidden_layers": 48,
        "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
        "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128,
        "num_experts_per_tok": 8, "norm_topk_prob": True, "decoder_sparse_step": 1,
        "mlp_only_layers": [], "vocab_size": 151936, "max_position_embeddings": 40960,
        "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
    },
}


def make_model(folder):
    """The Llama-3.2-1B shape with compare_gpu.py's seeded random weights, saved in bf16."""
    sys.path.insert(0, str(REPO / "tests/hf_reference"))
    import compare_gpu
    spec = compare_gpu.model_specs()["llama-3.2-1b-shape"]
    compare_gpu.check_rope(spec.config, spec)
    compare_gpu.make_model(spec, folder, seed=1000)


class Runner:
    """One loaded model and the measurements, each on the current CUDA stream."""

    def __init__(self, args, torch, transformers):
        self.args, self.torch, self.transformers = args, torch, transformers
        self.device = torch.device("cuda")
        start = time.perf_counter()
        options = {"dtype": torch.bfloat16, "attn_implementation": "sdpa"}
        if args.experts_implementation:
            options["experts_implementation"] = args.experts_implementation
        if args.shape:
            fields = dict(SHAPES[args.shape])
            config = transformers.AutoConfig.for_model(fields.pop("model_type"), **fields)
            torch.manual_seed(0)
            with self.device:  # initialized where it runs: no host copy of the weights
                self.model = transformers.AutoModelForCausalLM.from_config(config, **options)
            self.model = self.model.eval()
        else:
            self.model = transformers.AutoModelForCausalLM.from_pretrained(
                args.model, **options).to(self.device).eval()
        torch.cuda.synchronize()
        self.load_s = time.perf_counter() - start
        self.config = self.model.config
        self.vocab = self.config.vocab_size
        forward = inspect.signature(self.model.forward).parameters
        self.keep = ({"logits_to_keep": 1} if "logits_to_keep" in forward else
                     {"num_logits_to_keep": 1} if "num_logits_to_keep" in forward else {})
        self.generator = torch.Generator(device="cpu").manual_seed(0)

    # --- sizes ---

    def weight_bytes(self):
        return sum(p.numel() * p.element_size() for p in self.model.parameters())  # tied: once

    def weight_bytes_per_step(self):
        """As Tessera counts: all weights, less an untied embedding table (a step gathers rows) and
        the experts one token does not choose (stacked [E, ...] gate_up_proj and down_proj)."""
        total = self.weight_bytes()
        if not self.config.tie_word_embeddings:
            embedding = self.model.get_input_embeddings().weight
            total -= embedding.numel() * embedding.element_size()
        # Qwen3-MoE names the count num_experts, Mixtral num_local_experts.
        experts = (getattr(self.config, "num_experts", None) or
                   getattr(self.config, "num_local_experts", None) or 0)
        if experts:
            chosen, stacks = self.config.num_experts_per_tok, 0
            for module in self.model.modules():
                for name in ("gate_up_proj", "down_proj"):
                    weight = getattr(module, name, None)
                    if isinstance(weight, self.torch.nn.Parameter) and weight.dim() == 3:
                        stacks += 1
                        total -= weight.numel() * weight.element_size() * (experts - chosen) \
                            // experts
            if not stacks:
                raise SystemExit("compare_torch.py: a mixture of experts without stacked [E, ...] "
                                 "gate_up_proj / down_proj parameters; this transformers lays "
                                 "its experts out otherwise")
        return total

    def kv_bytes(self, batch, length):
        config = self.config
        head_dim = getattr(config, "head_dim", None) or \
            config.hidden_size // config.num_attention_heads
        return (2 * config.num_hidden_layers * batch * length * config.num_key_value_heads *
                head_dim * 2)

    def copy_gb_per_s(self):
        """1 GiB device-to-device copies, bytes read + written, median of 5 after a warm-up."""
        torch = self.torch
        source = torch.empty(2**29, dtype=torch.bfloat16, device=self.device)
        destination = torch.empty_like(source)
        destination.copy_(source)
        torch.cuda.synchronize()
        seconds = []
        for _ in range(5):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            destination.copy_(source)
            end.record()
            end.synchronize()
            seconds.append(start.elapsed_time(end) * 1e-3)
        del source, destination
        torch.cuda.empty_cache()
        return 2 * 2**30 / percentile(seconds, 50) / 1e9

    # --- work ---

    def prompts(self, batch, length):
        return self.torch.randint(0, self.vocab, (batch, length), generator=self.generator).to(
            self.device)

    def greedy(self, logits):
        """The step's end: argmax on the device, the ids on the host, fed back as [B, 1]."""
        ids = logits[:, -1].argmax(-1)
        host = ids.cpu()
        return ids[:, None], host

    def forward(self, ids, cache, **extra):
        return self.model(input_ids=ids, past_key_values=cache, use_cache=True, **self.keep,
                          **extra).logits

    def prefill_tokens_per_s(self, batch):
        """Eager prefill of `batch` prompts, whole prompts per forward up to the token budget."""
        torch, prompt = self.torch, self.args.prompt_len
        group = max(1, self.args.max_num_batched_tokens // prompt)

        def run(count):
            for first in range(0, count, group):
                ids = self.prompts(min(group, count - first), prompt)
                self.greedy(self.forward(ids, self.transformers.DynamicCache()))

        run(min(batch, group))  # warm-up: one step's worth
        tokens = batch * prompt
        runs = max(1, math.ceil(PREFILL_STEPS * self.args.max_num_batched_tokens / tokens))
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(runs):
            run(batch)
        return runs * tokens / (time.perf_counter() - start)

    def ttft_ms(self):
        times = []
        for run in range(TTFT_RUNS + 1):  # run 0 warms up
            ids = self.prompts(1, self.args.prompt_len)
            self.torch.cuda.synchronize()
            start = time.perf_counter()
            self.greedy(self.forward(ids, self.transformers.DynamicCache()))
            if run:
                times.append((time.perf_counter() - start) * 1e3)
        return percentile(times, 50)

    def timed_steps(self, step, next_ids):
        """Runs --warmup then --steps decode steps, each timed with CUDA events."""
        torch = self.torch
        for _ in range(self.args.warmup):
            next_ids = step(next_ids)
        times = []
        for _ in range(self.args.steps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            next_ids = step(next_ids)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return times

    def eager_steps(self, batch):
        cache = self.transformers.DynamicCache()
        next_ids, _ = self.greedy(self.forward(self.prompts(batch, self.args.context), cache))

        def step(ids):
            return self.greedy(self.forward(ids, cache))[0]

        return self.timed_steps(step, next_ids)

    def static_cache(self, batch, length):
        """A StaticCache for `batch` sequences of `length`, whatever this transformers calls
        its arguments (batch size given, or inferred at the first update in v5)."""
        StaticCache = self.transformers.StaticCache
        accepted = inspect.signature(StaticCache.__init__).parameters
        arguments = {"config": self.config, "max_cache_len": length}
        for name, value in (("max_batch_size", batch), ("batch_size", batch),
                            ("device", self.device), ("dtype", self.torch.bfloat16)):
            if name in accepted:
                arguments[name] = value
        if "max_batch_size" in arguments and "batch_size" in arguments:
            del arguments["batch_size"]
        return StaticCache(**arguments)

    def compiled_steps(self, batch, decode):
        """(step times, seconds of the first decode call: compile + graph recording + step)."""
        torch, context = self.torch, self.args.context
        cache = self.static_cache(batch, context + self.args.warmup + self.args.steps + 1)
        positions = torch.arange(context, device=self.device)
        logits = self.forward(self.prompts(batch, context), cache, cache_position=positions)
        next_ids, _ = self.greedy(logits)
        position = [context]

        def step(ids):
            cache_position = torch.tensor([position[0]], device=self.device)
            position_ids = cache_position.expand(ids.shape[0], 1)
            ids = decode(self.model, ids, position_ids, cache_position, cache)
            position[0] += 1
            ids.cpu()  # the ids on the host, as every step ends
            return ids.clone()  # reduce-overhead's outputs are overwritten by the next replay

        torch.cuda.synchronize()
        start = time.perf_counter()
        next_ids = step(next_ids)
        first = time.perf_counter() - start
        return self.timed_steps(step, next_ids), first

    def compiled_decode(self):
        torch = self.torch

        def decode_one_token(model, ids, position_ids, cache_position, cache):
            logits = model(input_ids=ids, position_ids=position_ids, cache_position=cache_position,
                           past_key_values=cache, use_cache=True, return_dict=False)[0]
            return logits[:, -1].argmax(-1)[:, None]

        return torch.compile(decode_one_token, mode="reduce-overhead", fullgraph=True)


def write_report(report, args):
    if args.json:
        Path(args.json + ".partial").write_text(json.dumps(report, indent=2) + "\n")
        os.replace(args.json + ".partial", args.json)
    if args.csv:
        lines = ["engine,label,mode,cudagraph_mode,batch_size,step_ms_median,step_ms_p90,"
                 "step_ms_min,tokens_per_s,prefill_tokens_per_s,ttft_ms,weight_gb_per_s,"
                 "weight_read_fraction_of_copy"]
        ttft = {mode["label"]: mode["ttft_ms"] for mode in report["modes"]}
        for row in report["rows"]:
            cells = [report["engine"], row["label"], row["mode"], row["cudagraph_mode"],
                     row["batch_size"], row["step_ms_median"], row["step_ms_p90"],
                     row["step_ms_min"], row["tokens_per_s"], row["prefill_tokens_per_s"],
                     ttft.get(row["label"]), row["weight_gb_per_s"],
                     row["weight_read_fraction_of_copy"]]
            lines.append(",".join("" if c is None else f"{c:.6g}" if isinstance(c, float)
                                  else str(c) for c in cells))
        Path(args.csv).write_text("\n".join(lines) + "\n")


def print_table(report):
    print(f"\n=== transformers sweep: {report['config']['model']} bf16 on "
          f"{report['device']['name']}, context {report['config']['context']} ===")
    print(f"copy bandwidth {report['copy_gb_per_s']:.1f} GB/s; "
          f"load {report['startup']['load_s']:.2f} s")
    print(f"{'mode':<24} {'batch':>6} {'median ms':>10} {'p90 ms':>10} {'tokens/s':>12} "
          f"{'prefill tok/s':>14} {'weights GB/s':>13}")
    for row in report["rows"]:
        prefill = row["prefill_tokens_per_s"]
        weights = row["weight_gb_per_s"]
        print(f"{row['label']:<24} {row['batch_size']:>6} {row['step_ms_median']:>10.3f} "
              f"{row['step_ms_p90']:>10.3f} {row['tokens_per_s']:>12.1f} "
              f"{'-' if prefill is None else f'{prefill:.0f}':>14} "
              f"{'-' if weights is None else f'{weights:.1f}':>13}")
    def seconds(value, unit):
        return "-" if value is None else f"{value:.2f} {unit}"

    for mode in report["modes"]:
        startup = mode["startup"]
        print(f"{mode['label']:<24} TTFT {seconds(mode['ttft_ms'], 'ms')}, compile cold "
              f"{seconds(startup['compile_cold_s'], 's')}, warm "
              f"{seconds(startup['compile_warm_s'], 's')}")


def row_of(label, mode, batch, times, prefill, report):
    median = percentile(times, 50)
    row = {"label": label, "mode": mode,
           "cudagraph_mode": "reduce-overhead" if mode == "compile" else "none",
           "batch_size": batch, "step_ms_median": median, "step_ms_p90": percentile(times, 90),
           "step_ms_min": min(times), "tokens_per_s": batch / (median * 1e-3),
           "prefill_tokens_per_s": prefill, "weight_gb_per_s": None,
           "weight_read_fraction_of_copy": None}
    if batch == 1:
        row["weight_gb_per_s"] = report["weight_bytes_per_step"] / (median * 1e-3) / 1e9
        row["weight_read_fraction_of_copy"] = row["weight_gb_per_s"] / report["copy_gb_per_s"]
    print(f"{label} batch {batch}: median {median:.3f} ms, {row['tokens_per_s']:.1f} tokens/s",
          flush=True)
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="a saved Hugging Face folder")
    source.add_argument("--make-model", metavar="DIR",
                        help="save the Llama-3.2-1B shape with random weights here, and exit")
    source.add_argument("--shape", choices=sorted(SHAPES),
                        help="build this shape in memory with random weights")
    parser.add_argument("--experts-implementation", choices=("eager", "batched_mm", "grouped_mm"),
                        help="transformers' experts backend for a mixture of experts")
    parser.add_argument("--batch-sizes", type=integers,
                        default=integers("1,2,4,8,16,32,64,128,256"))
    parser.add_argument("--modes", default="eager,compile")
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--prompt-len", type=int, default=512)
    parser.add_argument("--max-num-batched-tokens", type=int, default=2048)
    parser.add_argument("--json")
    parser.add_argument("--csv")
    args = parser.parse_args()
    modes = args.modes.split(",")
    if any(mode not in MODES for mode in modes) or len(set(modes)) != len(modes):
        parser.error(f"--modes {args.modes}: each of {', '.join(MODES)} at most once")
    for name in ("context", "steps", "prompt_len", "max_num_batched_tokens"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup < 3 and "compile" in modes:
        parser.error("--warmup must be at least 3 with compile (reduce-overhead records its CUDA "
                     "graphs in the first calls)")

    # Empty compiler caches, so that the first compile is cold; set before torch is imported.
    cache_root = tempfile.mkdtemp(prefix="tessera-torch-cache-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache_root, "inductor")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(cache_root, "triton")
    try:
        import torch
        import torch._dynamo
        import transformers
    except ImportError as error:
        sys.exit(f"compare_torch.py: needs torch and transformers ({error})")
    if not torch.cuda.is_available():
        sys.exit("compare_torch.py: no CUDA device")
    for name in ("cache_size_limit", "recompile_limit"):  # one compile per batch size
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 4 * len(args.batch_sizes) + 8)
    try:
        if args.make_model:
            start = time.perf_counter()
            make_model(args.make_model)
            print(f"saved the llama-3.2-1b shape to {args.make_model} in "
                  f"{time.perf_counter() - start:.1f} s", flush=True)
            return
        with torch.no_grad():
            run(args, modes, torch, transformers)
    finally:
        shutil.rmtree(cache_root, ignore_errors=True)


def run(args, modes, torch, transformers):
    runner = Runner(args, torch, transformers)
    properties = torch.cuda.get_device_properties(0)
    report = {
        "schema": SCHEMA, "engine": "transformers", "complete": False,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": source_commit(), "machine": machine_info(),
        "device": {"device": "cuda:0", "name": properties.name,
                   "memory_gib": properties.total_memory / 2**30},
        "config": {"model": args.model or f"shape:{args.shape}",
                   "model_description": runner.config.model_type,
                   "experts_implementation": args.experts_implementation,
                   "dtype": "bf16", "batch_sizes": args.batch_sizes, "modes": modes,
                   "cudagraph_modes": ["reduce-overhead" if m == "compile" else "none"
                                       for m in modes],
                   "context": args.context, "steps": args.steps, "warmup": args.warmup,
                   "prompt_len": args.prompt_len,
                   "max_num_batched_tokens": args.max_num_batched_tokens,
                   "step": "one token for each sequence: forward, greedy pick on the device, ids "
                           "copied to the host; timed with CUDA events",
                   "versions": {"torch": torch.__version__,
                                "transformers": transformers.__version__,
                                "python": platform.python_version()}},
        "copy_gb_per_s": runner.copy_gb_per_s(),
        "weight_bytes": runner.weight_bytes(),
        "weight_bytes_per_step": runner.weight_bytes_per_step(),
        "startup": {"load_s": runner.load_s},
        "notes": ["the compile mode's prefill runs uncompiled (transformers' static-cache "
                  "recipe): prefill and TTFT are given for eager only"],
        "modes": [], "rows": [],
    }
    largest = max(args.batch_sizes)
    length = args.context + args.warmup + args.steps
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"{properties.name}; copy {report['copy_gb_per_s']:.0f} GB/s; "
          f"load {runner.load_s:.2f} s", flush=True)
    for mode in modes:
        label = LABELS[mode]
        entry = {"label": label, "mode": mode, "cudagraph_mode": report["config"][
                     "cudagraph_modes"][modes.index(mode)],
                 "startup": {"compile_cold_s": None, "compile_warm_s": None, "capture_s": None,
                             "runner_s": None},
                 "memory": {"weights_bytes": report["weight_bytes"],
                            "kv_cache_bytes": runner.kv_bytes(largest, length + 1),
                            "arena_bytes": None, "graphs_bytes": None},
                 "ttft_ms": None, "notes": ""}
        report["modes"].append(entry)
        if mode == "eager":
            entry["ttft_ms"] = runner.ttft_ms()
            entry["notes"] = "DynamicCache; KV bytes for the largest batch at the longest length"
        else:
            entry["notes"] = ("StaticCache; capture (CUDA graph recording) is inside the first "
                              "calls and not separated")
            decode = runner.compiled_decode()
        write_report(report, args)
        for index, batch in enumerate(args.batch_sizes):
            if mode == "eager":
                times = runner.eager_steps(batch)
                prefill = runner.prefill_tokens_per_s(batch)
            else:
                times, first = runner.compiled_steps(batch, decode)
                prefill = None
                if index == 0:
                    entry["startup"]["compile_cold_s"] = max(
                        0.0, first - percentile(times, 50) * 1e-3)
            report["rows"].append(row_of(label, mode, batch, times, prefill, report))
            write_report(report, args)
            torch.cuda.empty_cache()
        if mode == "compile":  # warm: the same first call after a reset, the caches now full
            torch._dynamo.reset()
            decode = runner.compiled_decode()
            times, first = runner.compiled_steps(args.batch_sizes[0], decode)
            entry["startup"]["compile_warm_s"] = max(0.0, first - percentile(times, 50) * 1e-3)
            write_report(report, args)
    report["complete"] = True
    write_report(report, args)
    print_table(report)


if __name__ == "__main__":
    main()
