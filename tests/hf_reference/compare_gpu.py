"""Compares Tessera's logits on the GPU with Hugging Face transformers' on the same random weights.

Run ON THE GPU MACHINE from the repo root, after building (build/bench/logits_dump must exist):
    python3 tests/hf_reference/compare_gpu.py [--only llama,qwen3] [--binary PATH]

For each config (Llama, Qwen2, Qwen3, Mistral, Gemma 2 and Gemma 3 at small sizes, and the
Llama-3.2-1B shape) it
  1. makes a model with seeded random weights scaled so activations are O(1) (HF's 0.02 init
     leaves the logits nearly flat, where any engine "matches"), saves it with save_pretrained
     in bfloat16 to /tmp/hf_models/NAME;
  2. loads the SAVED weights back in float32 (the bf16 values upcast) and computes reference
     logits on the GPU in float32 (TF32 off, eager attention) with one forward over a 64-token
     prompt plus 32 decode ids: logits at positions 63 .. 95;
  3. runs build/bench/logits_dump on the same folder and ids (prefill 64, then 32 teacher-forced
     decode steps) on cuda in bf16, eager and compiled, and in f32 for the small configs;
  4. prints per config, dtype and mode: the max and mean over steps of ||tessera - ref|| / ||ref||,
     argmax agreement and NaN count, and exits non-zero when a relative error exceeds 5e-2 (bf16)
     or 1e-3 (f32), a step has a NaN, or a run fails. The table also goes to $OUT/hf_compare.txt
     when OUT is set.

Without a GPU or torch, `--cpu-tiny` checks the same pipeline (logits_dump + these metrics) on
the CPU against the committed references in tests/data/hf_tiny (f32, eager and compiled).
"""
import argparse
import array
import collections
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROMPT_TOKENS = 64
DECODE_TOKENS = 32
LIMITS = {"bf16": 5e-2, "f32": 1e-3}

SMALL = dict(vocab_size=1024, hidden_size=256, intermediate_size=688, num_attention_heads=8,
             num_key_value_heads=4, max_position_embeddings=512, bos_token_id=1, eos_token_id=2)


# norm_center: where RMSNorm weights center (Gemma multiplies by 1 + weight, so 0).
Spec = collections.namedtuple("Spec", "model_class config dtypes rope_theta rope_type norm_center",
                              defaults=(1.0,))

# Gemma: windows shorter than the 96 ids, softcaps small enough to change the result.
GEMMA = dict(SMALL, num_hidden_layers=4, hidden_activation="gelu_pytorch_tanh", sliding_window=16,
             query_pre_attn_scalar=96, final_logit_softcapping=10.0, tie_word_embeddings=True)


def model_specs():
    """NAME -> Spec: model class, config, dtypes Tessera runs in, and the RoPE settings the config
    must end up with. Imported late: --cpu-tiny needs no transformers."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from make_tiny_models import gemma3_rope  # torch and transformers come with it
    from transformers import (Gemma2Config, Gemma2ForCausalLM, Gemma3ForCausalLM,
                              Gemma3TextConfig, LlamaConfig, LlamaForCausalLM, MistralConfig,
                              MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config,
                              Qwen3ForCausalLM)
    small_dtypes = ("bf16", "f32")
    return {
        "llama": Spec(LlamaForCausalLM, LlamaConfig(
            **SMALL, num_hidden_layers=4, rms_norm_eps=1e-5, rope_theta=10000.0,
            tie_word_embeddings=False), small_dtypes, 10000.0, "default"),
        "qwen2": Spec(Qwen2ForCausalLM, Qwen2Config(
            **SMALL, num_hidden_layers=2, rms_norm_eps=1e-6, rope_theta=1000000.0,
            tie_word_embeddings=True), small_dtypes, 1000000.0, "default"),
        "qwen3": Spec(Qwen3ForCausalLM, Qwen3Config(
            **SMALL, num_hidden_layers=2, head_dim=64, rms_norm_eps=1e-6, rope_theta=1000000.0,
            tie_word_embeddings=True), small_dtypes, 1000000.0, "default"),
        "mistral": Spec(MistralForCausalLM, MistralConfig(
            **SMALL, num_hidden_layers=2, sliding_window=None, rope_theta=10000.0,
            tie_word_embeddings=False), small_dtypes, 10000.0, "default"),
        # head 64 / 128: the tensor-core prefill and the decode kernels with windows and caps
        "gemma2": Spec(Gemma2ForCausalLM, Gemma2Config(
            **GEMMA, head_dim=64, attn_logit_softcapping=5.0),
            small_dtypes, 10000.0, "default", 0.0),
        "gemma3": Spec(Gemma3ForCausalLM, Gemma3TextConfig(
            **GEMMA, head_dim=128, layer_types=["sliding_attention", "sliding_attention",
                                                "full_attention", "sliding_attention"],
            **gemma3_rope(1000000.0, 10000.0, 2.0)),
            small_dtypes, 1000000.0, "linear", 0.0),
        "llama-3.2-1b-shape": Spec(LlamaForCausalLM, LlamaConfig(
            vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
            num_attention_heads=32, num_key_value_heads=8, head_dim=64,
            max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=500000.0,
            rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
            tie_word_embeddings=True, bos_token_id=128000, eos_token_id=128001), ("bf16",),
            500000.0, "llama3"),
    }


# --- Metrics (plain Python, so --cpu-tiny runs without numpy or torch). ---

def step_metrics(got, want):
    """(relative error, argmax agrees, has NaN/inf) of one step's logits."""
    if not all(math.isfinite(x) for x in got):
        return math.inf, False, True
    diff = math.fsum((a - b) * (a - b) for a, b in zip(got, want))
    norm = math.fsum(b * b for b in want)
    agrees = max(range(len(got)), key=got.__getitem__) == max(range(len(want)),
                                                              key=want.__getitem__)
    return math.sqrt(diff / max(norm, 1e-30)), agrees, False


def compare(got_rows, want_rows):
    assert len(got_rows) == len(want_rows), (len(got_rows), len(want_rows))
    results = [step_metrics(g, w) for g, w in zip(got_rows, want_rows)]
    errors = [r[0] for r in results]
    return {"max_rel": max(errors), "mean_rel": sum(errors) / len(errors),
            "argmax_pct": 100.0 * sum(r[1] for r in results) / len(results),
            "nan_steps": sum(r[2] for r in results), "steps": len(results)}


def logit_spread(rows):
    """Mean over steps of the standard deviation of the logits: near 0 means flat logits."""
    spreads = []
    for row in rows:
        mean = sum(row) / len(row)
        spreads.append(math.sqrt(sum((x - mean) ** 2 for x in row) / len(row)))
    return sum(spreads) / len(spreads)


# --- Tessera side. ---

def run_logits_dump(binary, model_dir, ids, prefill, device, dtype, mode, work_dir,
                    overrides=()):
    """Runs logits_dump (with -O for each of `overrides`, section.key=value); returns (rows,
    seconds) or raises RuntimeError with its output."""
    out = Path(work_dir) / f"{Path(model_dir).name}-{device}-{dtype}-{mode}-{len(overrides)}.f32"
    command = [str(binary), "--model", str(model_dir), "--ids", ",".join(map(str, ids)),
               "--prefill", str(prefill), "--device", device, "--dtype", dtype,
               "--mode", mode, "--out", str(out)]
    for override in overrides:
        command += ["-O", override]
    start = time.time()
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    seconds = time.time() - start
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
        raise RuntimeError(f"logits_dump exit {done.returncode}:\n    " + "\n    ".join(tail))
    sidecar = json.loads(Path(str(out) + ".json").read_text())
    values = array.array("f")
    with open(out, "rb") as stream:
        values.frombytes(stream.read())
    if sys.byteorder != "little":
        values.byteswap()
    steps, vocab = sidecar["steps"], sidecar["vocab"]
    if len(values) != steps * vocab or sidecar["ids"] != list(ids):
        raise RuntimeError(f"{out}: {len(values)} values for {steps} x {vocab}, or other ids")
    rows = [values[s * vocab:(s + 1) * vocab].tolist() for s in range(steps)]
    out.unlink()
    return rows, seconds


# --- Reference side (GPU). ---

def randomize(model, seed, norm_center):
    """normal(0, 1/sqrt(fan_in)) weights keep activations O(1); norms norm_center + 0.1 N(0, 1)
    and biases 0.2 N(0, 1) make every term matter."""
    import torch
    generator = torch.Generator(device="cuda").manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator, device="cuda",
                                dtype=torch.float32)
            if "norm" in name:
                value = norm_center + 0.1 * noise
            elif name.endswith("bias"):
                value = 0.2 * noise
            else:
                value = noise / math.sqrt(parameter.shape[-1])
            parameter.copy_(value.to(parameter.dtype))


def check_rope(config, spec):
    """Fails when the installed transformers ignored the RoPE arguments given the config (v5
    reads the legacy rope_theta/rope_scaling into rope_parameters)."""
    parameters = dict(getattr(config, "rope_parameters", None) or {})
    parameters = parameters.get("full_attention", parameters)  # Gemma 3: per layer type
    theta = parameters.get("rope_theta", getattr(config, "rope_theta", None))
    legacy = getattr(config, "rope_scaling", None) or {}
    rope_type = parameters.get("rope_type", legacy.get("rope_type", "default"))
    if theta is None or abs(float(theta) - spec.rope_theta) > 1e-6 * spec.rope_theta or \
            rope_type != spec.rope_type:
        raise RuntimeError(f"config has RoPE theta {theta}, type {rope_type}; wanted "
                           f"{spec.rope_theta}, {spec.rope_type}: this transformers version "
                           "names RoPE arguments differently")


def make_model(spec, folder, seed):
    import torch
    with torch.device("cuda"):
        model = spec.model_class(spec.config).float().eval()
    randomize(model, seed, spec.norm_center)
    model.to(torch.bfloat16).save_pretrained(folder, safe_serialization=True)
    del model
    torch.cuda.empty_cache()


def check_weights_are_stored_ones(model, folder):
    """Every parameter must be float32 and equal to the stored bf16 tensor upcast: the reference
    and Tessera must run the very same weights (the committed tests/data/hf_tiny/llama-bf16
    reference is 7e-3 away from a float64 forward of its stored weights, so this is checked)."""
    import torch
    from safetensors.torch import load_file
    parameters = dict(model.named_parameters(remove_duplicate=False))  # tied: both names
    stored_names = set()
    for path in sorted(Path(folder).glob("*.safetensors")):
        for name, stored in load_file(str(path), device="cuda").items():
            stored_names.add(name)
            parameter = parameters.get(name)
            if parameter is None:
                raise RuntimeError(f"{path.name}: {name} is not a parameter of the loaded model")
            if parameter.dtype != torch.float32 or not torch.equal(parameter, stored.float()):
                raise RuntimeError(f"{name}: the loaded {parameter.dtype} parameter differs from "
                                   f"the stored {stored.dtype} tensor upcast")
    missing = {name for name, _ in model.named_parameters()} - stored_names
    if missing:
        raise RuntimeError(f"parameters not in the checkpoint: {sorted(missing)[:5]}")


def reference_logits(spec, folder, ids):
    """float32 logits at positions PROMPT_TOKENS-1 .. end, from the saved bf16 weights upcast."""
    import torch
    model = spec.model_class.from_pretrained(folder, dtype=torch.float32,
                                             attn_implementation="eager").to("cuda").float().eval()
    check_rope(model.config, spec)
    check_weights_are_stored_ones(model, folder)
    with torch.no_grad():
        logits = model(torch.tensor([ids], device="cuda")).logits[0].float()
    rows = logits[PROMPT_TOKENS - 1:].cpu().tolist()
    del model, logits
    torch.cuda.empty_cache()
    return rows


# --- Driving and reporting. ---

def format_table(rows):
    header = (f"{'config':<20} {'dtype':<5} {'mode':<9} {'steps':>5} {'max rel':>10} "
              f"{'mean rel':>10} {'argmax':>7} {'NaN':>4} {'limit':>7} {'ref std':>8} "
              f"{'time s':>7}  result")
    lines = [header, "-" * len(header)]
    for row in rows:
        if "error" in row:
            lines.append(f"{row['config']:<20} {row['dtype']:<5} {row['mode']:<9} "
                         f"{'-':>5} {'-':>10} {'-':>10} {'-':>7} {'-':>4} "
                         f"{LIMITS[row['dtype']]:>7.0e} {'-':>8} {'-':>7}  FAILED to run")
            continue
        lines.append(f"{row['config']:<20} {row['dtype']:<5} {row['mode']:<9} {row['steps']:>5} "
                     f"{row['max_rel']:>10.3e} {row['mean_rel']:>10.3e} "
                     f"{row['argmax_pct']:>6.1f}% {row['nan_steps']:>4} "
                     f"{LIMITS[row['dtype']]:>7.0e} {row['ref_std']:>8.3f} "
                     f"{row['seconds']:>7.1f}  {'ok' if row['ok'] else 'FAIL'}")
    return "\n".join(lines)


def evaluate(rows_out, config_name, dtype, mode, got, want, ref_std, seconds):
    metrics = compare(got, want)
    ok = metrics["max_rel"] <= LIMITS[dtype] and metrics["nan_steps"] == 0
    row = dict(config=config_name, dtype=dtype, mode=mode, ref_std=ref_std, seconds=seconds,
               ok=ok, **metrics)
    rows_out.append(row)
    print(f"{config_name} {dtype} {mode}: max rel {metrics['max_rel']:.3e}, mean rel "
          f"{metrics['mean_rel']:.3e}, argmax {metrics['argmax_pct']:.1f}%, "
          f"NaN steps {metrics['nan_steps']} -> {'ok' if ok else 'FAIL'}", flush=True)


def run_tessera_modes(rows_out, binary, config_name, folder, ids, prefill, device, dtypes, want,
                      work):
    ref_std = logit_spread(want)
    for dtype in dtypes:
        for mode in ("eager", "compiled"):
            try:
                got, seconds = run_logits_dump(binary, folder, ids, prefill, device, dtype, mode,
                                               work)
            except (RuntimeError, subprocess.TimeoutExpired) as error:
                print(f"{config_name} {dtype} {mode}: {error}", flush=True)
                rows_out.append(dict(config=config_name, dtype=dtype, mode=mode, ok=False,
                                     error=str(error)))
                continue
            evaluate(rows_out, config_name, dtype, mode, got, want, ref_std, seconds)


def gpu_main(args, work):
    import torch
    import transformers
    torch.set_float32_matmul_precision("highest")  # no TF32 in the float32 reference
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"{torch.cuda.get_device_name(0)}", flush=True)
    specs = model_specs()
    names = args.only.split(",") if args.only else list(specs)
    unknown = [n for n in names if n not in specs]
    if unknown:
        sys.exit(f"--only: unknown config {unknown}; choose from {', '.join(specs)}")
    rows = []
    for name in names:
        spec = specs[name]
        index = list(specs).index(name)  # seeds do not depend on --only
        folder = Path(args.models_dir) / name
        start = time.time()
        generator = torch.Generator().manual_seed(7 + index)
        ids = torch.randint(3, spec.config.vocab_size, (PROMPT_TOKENS + DECODE_TOKENS,),
                            generator=generator).tolist()
        try:
            check_rope(spec.config, spec)
            make_model(spec, folder, seed=1000 + index)
            want = reference_logits(spec, folder, ids)
        except Exception as error:  # one config's failure must not hide the others' results
            print(f"{name}: making the model or its reference failed: {error!r}", flush=True)
            rows += [dict(config=name, dtype=dtype, mode=mode, ok=False, error=repr(error))
                     for dtype in spec.dtypes for mode in ("eager", "compiled")]
            torch.cuda.empty_cache()
            continue
        print(f"{name}: saved and referenced in {time.time() - start:.1f} s "
              f"({sum(f.stat().st_size for f in folder.iterdir()) / 2**20:.1f} MiB)", flush=True)
        run_tessera_modes(rows, args.binary, name, folder, ids, PROMPT_TOKENS, "cuda",
                          spec.dtypes, want, work)
    return rows


def cpu_tiny_main(args, work):
    """The same pipeline on the CPU against tests/data/hf_tiny's committed transformers logits."""
    rows = []
    prefill = 24  # of their 40 ids: a prefill and 16 decode steps
    for folder in sorted((REPO / "tests/data/hf_tiny").iterdir()):
        expected = json.loads((folder / "expected.json").read_text())
        ids = expected["input_ids"]
        want = expected["logits"][prefill - 1:]
        run_tessera_modes(rows, args.binary, folder.name, folder, ids, prefill, "cpu", ("f32",),
                          want, work)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default=str(REPO / "build/bench/logits_dump"))
    parser.add_argument("--models-dir", default="/tmp/hf_models")
    parser.add_argument("--only", help="comma-separated config names")
    parser.add_argument("--cpu-tiny", action="store_true",
                        help="check the pipeline on the CPU against tests/data/hf_tiny")
    args = parser.parse_args()
    if not Path(args.binary).is_file():
        sys.exit(f"{args.binary} not found: build first (cmake --build build --target "
                 "logits_dump) or pass --binary")
    with tempfile.TemporaryDirectory(prefix="tessera-logits-") as work:
        rows = cpu_tiny_main(args, work) if args.cpu_tiny else gpu_main(args, work)
    table = format_table(rows)
    failed = [r for r in rows if not r["ok"]]
    summary = (f"{len(rows) - len(failed)} of {len(rows)} runs within limits "
               f"(bf16 {LIMITS['bf16']:.0e}, f32 {LIMITS['f32']:.0e}, no NaN)")
    print("\n=== Tessera vs transformers logits (per-step relative error) ===")
    print(table)
    print(summary)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "hf_compare.txt").write_text(table + "\n" + summary + "\n")
    return 1 if failed or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
