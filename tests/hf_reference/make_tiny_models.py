"""Makes tiny Hugging Face models with random weights and their reference logits.

Run on the GPU machine (it has torch and transformers; no network needed):
    python3 tests/hf_reference/make_tiny_models.py OUT_DIR [--only gemma2,gemma3]
Each OUT_DIR/<name>/ holds config.json, generation_config.json, model.safetensors (as
save_pretrained writes them) and expected.json: input ids and transformers' float32 logits for
every position. The models are small enough (a few hundred KB) to commit as test data in
tests/data/hf_tiny/, so the CPU suite compares Tessera's logits with transformers' in CI.
"""
import argparse
import inspect
import json
from pathlib import Path

import torch
import transformers
from transformers import (Gemma2Config, Gemma2ForCausalLM, Gemma3ForCausalLM, Gemma3TextConfig,
                          LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM,
                          MixtralConfig, MixtralForCausalLM, Qwen2Config, Qwen2ForCausalLM,
                          Qwen3Config, Qwen3ForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM)

COMMON = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
              bos_token_id=1, eos_token_id=2)

MODELS = {
    "llama": (LlamaForCausalLM, LlamaConfig(**COMMON, rms_norm_eps=1e-6, rope_theta=10000.0,
                                            tie_word_embeddings=False), torch.float32),
    "llama3-scaled-tied": (LlamaForCausalLM, LlamaConfig(
        **COMMON, rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 32}),
                           torch.float32),
    "llama-bf16": (LlamaForCausalLM, LlamaConfig(**COMMON, tie_word_embeddings=False),
                   torch.bfloat16),
    "mistral": (MistralForCausalLM, MistralConfig(**COMMON, sliding_window=None,
                                                  tie_word_embeddings=False), torch.float32),
    "qwen2": (Qwen2ForCausalLM, Qwen2Config(**COMMON, tie_word_embeddings=True), torch.float32),
    "qwen3": (Qwen3ForCausalLM, Qwen3Config(**COMMON, head_dim=32, tie_word_embeddings=True),
              torch.float32),
}

# Gemma: windows shorter than the 40-token prompt and softcaps small enough to bite, so the
# sliding layers, both caps and the local/global RoPE bases all change the logits.
GEMMA_COMMON = dict(COMMON, num_hidden_layers=4, hidden_activation="gelu_pytorch_tanh",
                    sliding_window=4, tie_word_embeddings=True)


def gemma3_rope(global_theta, local_theta, linear_factor):
    """Gemma 3's two RoPE bases (global layers scaled linearly), in the keyword this
    transformers version takes: per-layer-type rope_parameters (v5) or the v4 fields."""
    parameters = inspect.signature(Gemma3TextConfig.__init__).parameters
    if "rope_parameters" in parameters:
        return dict(rope_parameters={
            "full_attention": {"rope_type": "linear", "factor": linear_factor,
                               "rope_theta": global_theta},
            "sliding_attention": {"rope_type": "default", "rope_theta": local_theta}})
    return dict(rope_theta=global_theta, rope_local_base_freq=local_theta,
                rope_scaling={"rope_type": "linear", "factor": linear_factor})


MODELS["gemma2"] = (Gemma2ForCausalLM, Gemma2Config(
    **GEMMA_COMMON, head_dim=16, query_pre_attn_scalar=24, attn_logit_softcapping=5.0,
    final_logit_softcapping=3.0, rms_norm_eps=1e-6), torch.float32)
MODELS["gemma3"] = (Gemma3ForCausalLM, Gemma3TextConfig(
    **GEMMA_COMMON, head_dim=32, query_pre_attn_scalar=24, final_logit_softcapping=3.0,
    rms_norm_eps=1e-6, layer_types=["sliding_attention", "full_attention", "sliding_attention",
                                    "sliding_attention"],
    **gemma3_rope(1000000.0, 10000.0, 2.0)), torch.float32)

# Mistral with a window shorter than the 40-token prompt: every layer slides.
MODELS["mistral-window"] = (MistralForCausalLM, MistralConfig(
    **COMMON, sliding_window=6, tie_word_embeddings=False), torch.float32)

# Mixtures of experts: 8 experts, 2 per token. Mixtral renormalizes the top-2 weights; Qwen3-MoE
# does where norm_topk_prob says so, and keeps dense MLPs in mlp_only_layers and off the
# decoder_sparse_step.
MOE_COMMON = dict(COMMON, intermediate_size=32, num_experts_per_tok=2)
MODELS["mixtral"] = (MixtralForCausalLM, MixtralConfig(
    **MOE_COMMON, num_local_experts=8, sliding_window=None, rope_theta=1000000.0,
    router_jitter_noise=0.0, tie_word_embeddings=False), torch.float32)
MODELS["qwen3-moe"] = (Qwen3MoeForCausalLM, Qwen3MoeConfig(
    **dict(MOE_COMMON, intermediate_size=96), head_dim=32, num_experts=8,
    moe_intermediate_size=32, norm_topk_prob=True,
    decoder_sparse_step=1, mlp_only_layers=[1], tie_word_embeddings=True), torch.float32)
MODELS["qwen3-moe-unnormalized"] = (Qwen3MoeForCausalLM, Qwen3MoeConfig(
    **dict(MOE_COMMON, intermediate_size=96), head_dim=16, num_experts=8,
    moe_intermediate_size=32, norm_topk_prob=False,
    decoder_sparse_step=2, mlp_only_layers=[], tie_word_embeddings=False), torch.float32)

# Softcapping is only in transformers' eager attention; eager masks the window exactly too.
EAGER = {"gemma2", "gemma3", "mistral-window"}
# Gemma's RMSNorm multiplies by (1 + weight): its norm weights center on 0, not 1.
NORM_CENTER = {"gemma2": 0.0, "gemma3": 0.0}


def randomize(model, seed, norm_center=1.0):
    """Weights larger than HF's 0.02 init, and norms away from 1, so every term matters."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            if "norm" in name:
                parameter.copy_(norm_center + 0.2 * noise)
            elif name.endswith("bias"):
                parameter.copy_(0.5 * noise)
            else:
                parameter.copy_(noise / parameter.shape[-1] ** 0.5 * 1.5)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--only", default="", help="comma-separated names (default: all)")
    args = parser.parse_args()
    only = set(filter(None, args.only.split(",")))
    unknown = only - set(MODELS)
    if unknown:
        parser.error(f"unknown models {sorted(unknown)}; known: {', '.join(MODELS)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print("transformers", transformers.__version__, "torch", torch.__version__)
    for index, (name, (model_class, config, dtype)) in enumerate(MODELS.items()):
        if only and name not in only:
            continue  # the index still seeds each model, so a subset reproduces the full run
        extra = {"attn_implementation": "eager"} if name in EAGER else {}
        if extra:
            config._attn_implementation = "eager"
        torch.manual_seed(index)
        model = model_class(config).float().eval()
        randomize(model, seed=1000 + index, norm_center=NORM_CENTER.get(name, 1.0))
        folder = out / name
        model.to(dtype).save_pretrained(folder, safe_serialization=True)
        # The reference runs in float32 on the stored (possibly rounded) weights, loaded afresh
        # so buffers such as RoPE's inv_freq are computed in float32, not rounded by .to().
        model = model_class.from_pretrained(folder, dtype=torch.float32, **extra).eval()
        generator = torch.Generator().manual_seed(7 + index)
        input_ids = torch.randint(3, config.vocab_size, (1, 40), generator=generator)
        with torch.no_grad():
            logits = model(input_ids).logits[0].float()
        expected = {"input_ids": input_ids[0].tolist(),
                    "logits": [[round(v, 6) for v in row] for row in logits.tolist()],
                    "transformers": transformers.__version__}
        (folder / "expected.json").write_text(json.dumps(expected))
        size = sum(f.stat().st_size for f in folder.iterdir())
        if "moe" in name or "mixtral" in name:
            from safetensors import safe_open
            with safe_open(str(folder / "model.safetensors"), "pt") as stored:
                print(name, "tensors:", {key: tuple(stored.get_slice(key).get_shape())
                                         for key in stored.keys() if "layers.0." in key})
        print(f"{name}: {size / 1024:.0f} KiB, logits {tuple(logits.shape)}, "
              f"max |logit| {logits.abs().max():.3f}")


if __name__ == "__main__":
    main()
