#!/usr/bin/env python3
"""Writes the generated seed inputs of the fuzz targets into tests/fuzz/corpus/ (python3, no
packages): tiny but valid model files (safetensors, GGUF, llama2.c), tokenizers, configs and
request bodies, so that fuzzing starts deep inside each format. Deterministic; rerun after
changing a format. Other files there (inputs that once crashed, kept as regression tests) are
left alone."""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
SOURCE = os.path.dirname(os.path.dirname(HERE))

# The tiny Llama of tests/fuzz/tiny_model.h.
VOCAB, HIDDEN, FFN, LAYERS, HEADS, KV_HEADS, POSITIONS = 16, 8, 16, 1, 2, 1, 32
HEAD_DIM = HIDDEN // HEADS
HF_SHAPES = [
    ("model.embed_tokens.weight", [VOCAB, HIDDEN]),
    ("model.layers.0.input_layernorm.weight", [HIDDEN]),
    ("model.layers.0.self_attn.q_proj.weight", [HIDDEN, HIDDEN]),
    ("model.layers.0.self_attn.k_proj.weight", [KV_HEADS * HEAD_DIM, HIDDEN]),
    ("model.layers.0.self_attn.v_proj.weight", [KV_HEADS * HEAD_DIM, HIDDEN]),
    ("model.layers.0.self_attn.o_proj.weight", [HIDDEN, HIDDEN]),
    ("model.layers.0.post_attention_layernorm.weight", [HIDDEN]),
    ("model.layers.0.mlp.gate_proj.weight", [FFN, HIDDEN]),
    ("model.layers.0.mlp.up_proj.weight", [FFN, HIDDEN]),
    ("model.layers.0.mlp.down_proj.weight", [HIDDEN, FFN]),
    ("model.norm.weight", [HIDDEN]),
]


def numel(shape):
    count = 1
    for size in shape:
        count *= size
    return count


def values(count, salt):
    return [((i * 37 + salt * 11) % 23 - 11) / 16.0 for i in range(count)]


def encode(dtype, floats):
    if dtype == "F32":
        return struct.pack(f"<{len(floats)}f", *floats)
    if dtype == "F16":
        return struct.pack(f"<{len(floats)}e", *floats)
    if dtype == "BF16":  # the top half of each float32
        return b"".join(struct.pack("<f", x)[2:] for x in floats)
    raise ValueError(dtype)


def write(target, name, data):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as out:
        out.write(data if isinstance(data, bytes) else data.encode())


def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape, bytes)]"""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, payload in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def tiny_safetensors(dtype, extra=()):
    tensors = [(name, dtype, shape, encode(dtype, values(numel(shape), i)))
               for i, (name, shape) in enumerate(HF_SHAPES)]
    return safetensors(tensors + list(extra), {"format": "pt"})


# ---- GGUF ----

GGUF_TYPES = {"u8": 0, "i8": 1, "u16": 2, "i16": 3, "u32": 4, "i32": 5, "f32": 6, "bool": 7,
              "str": 8, "arr": 9, "u64": 10, "i64": 11, "f64": 12}
SCALAR_FORMATS = {"u8": "B", "i8": "b", "u16": "H", "i16": "h", "u32": "I", "i32": "i",
                  "f32": "f", "bool": "?", "u64": "Q", "i64": "q", "f64": "d"}


def gguf_string(text):
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def gguf_value(kind, value):
    if kind == "str":
        return gguf_string(value)
    if kind.startswith("arr:"):
        element = kind[4:]
        body = b"".join(gguf_value(element, item) for item in value)
        return struct.pack("<IQ", GGUF_TYPES[element], len(value)) + body
    return struct.pack("<" + SCALAR_FORMATS[kind], value)


def gguf(metadata, tensors, alignment=32):
    """metadata: [(key, kind, value)]; tensors: [(name, ggml_type, row-major shape, bytes)]"""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata))
    for key, kind, value in metadata:
        type_id = GGUF_TYPES["arr"] if kind.startswith("arr:") else GGUF_TYPES[kind]
        out += gguf_string(key) + struct.pack("<I", type_id) + gguf_value(kind, value)
    offset, data = 0, b""
    for name, ggml_type, shape, payload in tensors:
        out += gguf_string(name) + struct.pack("<I", len(shape))
        out += b"".join(struct.pack("<Q", size) for size in reversed(shape))
        out += struct.pack("<IQ", ggml_type, offset)
        padded = payload + b"\0" * ((alignment - len(payload) % alignment) % alignment)
        data += padded
        offset += len(padded)
    out += b"\0" * ((alignment - len(out) % alignment) % alignment)
    return out + data


GGUF_NAMES = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def gguf_name(hf_name):
    if hf_name in GGUF_NAMES:
        return GGUF_NAMES[hf_name]
    rest = hf_name.split(".", 3)[3]
    return "blk.0." + GGUF_NAMES[rest]


def gguf_model(architecture, ggml_type, dtype, tokenizer, extra_tensors=()):
    prefix = architecture + "."
    metadata = [
        ("general.architecture", "str", architecture),
        (prefix + "block_count", "u32", LAYERS),
        (prefix + "embedding_length", "u32", HIDDEN),
        (prefix + "feed_forward_length", "u32", FFN),
        (prefix + "attention.head_count", "u32", HEADS),
        (prefix + "attention.head_count_kv", "u32", KV_HEADS),
        (prefix + "context_length", "u32", POSITIONS),
        (prefix + "rope.freq_base", "f32", 10000.0),
        (prefix + "attention.layer_norm_rms_epsilon", "f32", 1e-5),
    ] + tokenizer
    tensors = [(gguf_name(name), ggml_type, shape, encode(dtype, values(numel(shape), i)))
               for i, (name, shape) in enumerate(HF_SHAPES)]
    return gguf(metadata, tensors + list(extra_tensors))


LLAMA_PIECES = ["<unk>", "<s>", "</s>", "\u2581", "a", "b", "t", "\u2581a", "\u2581t", "ab", "he",
                "\u2581the", "<0x0A>", "<0x20>", "\u2581b", "at"]
LLAMA_TOKENIZER = [
    ("tokenizer.ggml.model", "str", "llama"),
    ("tokenizer.ggml.tokens", "arr:str", LLAMA_PIECES),
    ("tokenizer.ggml.scores", "arr:f32", [0.0, 0.0, 0.0] + [-float(i) for i in range(13)]),
    ("tokenizer.ggml.token_type", "arr:i32", [2, 3, 3] + [1] * 9 + [6, 6, 1, 1]),
    ("tokenizer.ggml.bos_token_id", "u32", 1),
    ("tokenizer.ggml.eos_token_id", "u32", 2),
    ("tokenizer.ggml.unknown_token_id", "u32", 0),
    ("tokenizer.ggml.add_bos_token", "bool", True),
]
GPT2_TOKENS = ["a", "b", "c", "\u0120", "ab", "\u0120a", "bc", "\u0120ab", "d", "e", "de", "!",
               "<|endoftext|>", "<|im_start|>", "<|im_end|>", "abc"]
GPT2_TOKENIZER = [
    ("tokenizer.ggml.model", "str", "gpt2"),
    ("tokenizer.ggml.pre", "str", "qwen2"),
    ("tokenizer.ggml.tokens", "arr:str", GPT2_TOKENS),
    ("tokenizer.ggml.token_type", "arr:i32", [1] * 12 + [3, 3, 3, 1]),
    ("tokenizer.ggml.merges", "arr:str", ["a b", "\u0120 a", "b c", "\u0120a b", "d e", "ab c"]),
    ("tokenizer.ggml.bos_token_id", "u32", 12),
    ("tokenizer.ggml.eos_token_id", "u32", 14),
]


# ---- llama2.c ----

def llama2c_checkpoint(vocab_sign):
    header = struct.pack("<7i", HIDDEN, FFN, LAYERS, HEADS, KV_HEADS, vocab_sign * VOCAB, 4)
    sizes = [VOCAB * HIDDEN, LAYERS * HIDDEN, LAYERS * HIDDEN * HIDDEN,
             LAYERS * KV_HEADS * HEAD_DIM * HIDDEN, LAYERS * KV_HEADS * HEAD_DIM * HIDDEN,
             LAYERS * HIDDEN * HIDDEN, LAYERS * HIDDEN, LAYERS * FFN * HIDDEN,
             LAYERS * HIDDEN * FFN, LAYERS * FFN * HIDDEN, HIDDEN, 4 * HEAD_DIM // 2,
             4 * HEAD_DIM // 2]
    if vocab_sign < 0:
        sizes.append(VOCAB * HIDDEN)
    return header + b"".join(encode("F32", values(size, i)) for i, size in enumerate(sizes))


def llama2c_tokenizer():
    pieces = ["<unk>", "\n<s>\n", "\n</s>\n"] + ["<0x%02X>" % byte for byte in range(256)]
    pieces += [" a", "ab", " t", "he", " the", "at", " c", "cat", " cat", "\u00e9"]
    out = struct.pack("<i", 8)
    for i, piece in enumerate(pieces):
        data = piece.encode()
        out += struct.pack("<fi", -float(i % 50), len(data)) + data
    return out


def main():
    # safetensors
    write("fuzz_safetensors", "tiny_llama_f32.safetensors", tiny_safetensors("F32"))
    write("fuzz_safetensors", "tiny_llama_bf16.safetensors", tiny_safetensors("BF16"))
    write("fuzz_safetensors", "extra_dtypes.safetensors", tiny_safetensors(
        "F16", [("step", "I64", [1], struct.pack("<q", 7)), ("scales", "F8_E4M3", [4], b"\1\2\3\4"),
                ("packed", "F4", [3], b"\x12\x03")]))
    # safetensors index (the shards are written by the target: tensor i in shard i % 2 + 1)
    weight_map = {name: "model-0000%d-of-00002.safetensors" % (i % 2 + 1)
                  for i, (name, _) in enumerate(HF_SHAPES)}
    write("fuzz_safetensors_index", "index.json",
          json.dumps({"metadata": {"total_size": 2912}, "weight_map": weight_map}, indent=2))
    swapped = {name: "model-0000%d-of-00002.safetensors" % (2 - i % 2)
               for i, (name, _) in enumerate(HF_SHAPES)}
    write("fuzz_safetensors_index", "wrong_shards.json", json.dumps({"weight_map": swapped}))
    # GGUF
    write("fuzz_gguf", "tiny_llama_f32.gguf", gguf_model("llama", 0, "F32", LLAMA_TOKENIZER))
    write("fuzz_gguf", "tiny_qwen2_f16.gguf", gguf_model("qwen2", 1, "F16", GPT2_TOKENIZER))
    write("fuzz_gguf", "tiny_llama_bf16_rope_freqs.gguf", gguf_model(
        "llama", 30, "BF16", LLAMA_TOKENIZER,
        [("rope_freqs.weight", 0, [HEAD_DIM // 2], encode("F32", [1.0] * (HEAD_DIM // 2)))]))
    # llama2.c
    write("fuzz_llama2c_checkpoint", "tiny_shared.bin", llama2c_checkpoint(1))
    write("fuzz_llama2c_checkpoint", "tiny_untied.bin", llama2c_checkpoint(-1))
    write("fuzz_llama2c_tokenizer", "bytes_and_pieces.bin", llama2c_tokenizer())
    # config.json of every architecture, one with a generation config after a NUL
    tiny = os.path.join(SOURCE, "tests", "data", "hf_tiny")
    for name in sorted(os.listdir(tiny)):
        with open(os.path.join(tiny, name, "config.json"), "rb") as config:
            write("fuzz_hf_config", name + ".json", config.read())
    # FP8 checkpoints' quantization_config: the fp8 method per block, compressed-tensors per channel
    with open(os.path.join(tiny, "qwen3", "config.json"), "rb") as config:
        qwen3 = json.loads(config.read())
    qwen3["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3",
                                    "activation_scheme": "dynamic", "weight_block_size": [128, 128],
                                    "modules_to_not_convert": ["lm_head", "re:.*mlp.*"]}
    write("fuzz_hf_config", "qwen3_fp8_block.json", json.dumps(qwen3, indent=1).encode())
    qwen3["quantization_config"] = {
        "quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
        "config_groups": {"group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "dynamic": False},
            "input_activations": {"num_bits": 8, "type": "float", "strategy": "token",
                                  "dynamic": True}}},
        "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor",
                            "dynamic": False, "symmetric": True}}
    write("fuzz_hf_config", "qwen3_fp8_channel.json", json.dumps(qwen3, indent=1).encode())
    with open(os.path.join(tiny, "llama", "config.json"), "rb") as config:
        with open(os.path.join(tiny, "llama", "generation_config.json"), "rb") as generation:
            write("fuzz_hf_config", "llama_with_generation.json", config.read() + b"\0" + generation.read())
    # tokenizer.json: a byte-level BPE and a sentencepiece-style one written here
    byte_level = {
        "version": "1.0",
        "added_tokens": [{"id": 16, "content": "<|endoftext|>", "special": True, "normalized": False,
                          "lstrip": False, "rstrip": False, "single_word": False},
                         {"id": 17, "content": "<tool>", "special": False, "normalized": True,
                          "lstrip": True, "rstrip": False, "single_word": True}],
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\p{N}"}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [], "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [16]}}},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "fuse_unk": False,
                  "byte_fallback": False, "ignore_merges": True,
                  "vocab": {token: i for i, token in enumerate(GPT2_TOKENS[:12] + ["1", "2", "\u0120\u0120", "Ċ"])},
                  "merges": [["a", "b"], ["\u0120", "a"], "b c", "\u0120a b", "d e"]},
    }
    write("fuzz_tokenizer_json", "byte_level.json", json.dumps(byte_level, indent=1))
    sentencepiece = {
        "version": "1.0",
        "added_tokens": [{"id": 0, "content": "<unk>", "special": True},
                         {"id": 1, "content": "<s>", "special": True},
                         {"id": 2, "content": "</s>", "special": True}],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [1]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": True, "byte_fallback": True,
                  "vocab": {token: i for i, token in enumerate(LLAMA_PIECES)},
                  "merges": ["\u2581 a", "\u2581 t", "a b", "h e", "\u2581t he", "a t", "\u2581 b"]},
    }
    write("fuzz_tokenizer_json", "sentencepiece.json", json.dumps(sentencepiece, indent=1))
    # text through the real tokenizers: the first byte picks one (and flags), the rest is text
    texts = ["Once upon a time", " leading and  double  spaces\n\nlines\t", "caf\u00e9 \u4f60\u597d \U0001F600",
             "<s>x</s><|endoftext|><|im_start|>user", "1234567 3.14 -42", "\u2581\u2581a"]
    for selector in range(6):
        for i, text in enumerate(texts):
            write("fuzz_tokenizer_text", "t%d_%d.txt" % (selector, i),
                  bytes([selector | (0x40 if i % 2 else 0) | (0x80 if i % 3 == 0 else 0)]) + text.encode())
    write("fuzz_tokenizer_text", "invalid_utf8.bin", b"\x02\xff\xfe\xc3(\xe2\x82")
    # run configs: the presets, and one with overrides after a NUL
    configs = os.path.join(SOURCE, "configs")
    for name in sorted(os.listdir(configs)):
        with open(os.path.join(configs, name), "rb") as config:
            write("fuzz_run_config", name, config.read())
    write("fuzz_run_config", "overrides.yaml",
          "engine:\n  max_num_seqs: 8\n  num_kv_blocks: 64\ncompilation:\n  pass_config:\n    enable_cse: false\n"
          "\0compilation.custom_ops=[none,+rms_norm]\nengine.block_size=32\ncompilation.mode=eager\n"
          "compilation.cudagraph_mode=piecewise\ncompilation.cudagraph_capture_sizes=[1, 2, 4]")

    # request bodies: the first byte picks the route (bit 0: chat) and the chat template (bits 1-2)
    bodies = {
        "completion.json": (0, {"model": "tessera", "prompt": "Once upon a time", "max_tokens": 8,
                                "temperature": 0.7, "top_p": 0.9, "stop": ["\n", "The end"], "seed": 7}),
        "completion_lists.json": (0, {"model": "m", "prompt": [[1, 2, 3], "text", [5]], "n": 2,
                                      "logprobs": 3, "stream": True,
                                      "stream_options": {"include_usage": True}, "stop_token_ids": [2]}),
        "chat_llama3.json": (1, {"model": "m", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
            "max_completion_tokens": 5, "logprobs": True, "top_logprobs": 2}),
        "chat_chatml.json": (3, {"model": "m", "messages": [
            {"role": "developer", "content": "x"}, {"role": "assistant", "content": "y"},
            {"role": "user", "content": "z", "name": "u"}], "top_k": 5, "min_p": 0.1,
            "repetition_penalty": 1.1, "presence_penalty": 0.5, "frequency_penalty": -0.5,
            "ignore_eos": True, "skip_special_tokens": False}),
        "chat_mistral.json": (5, {"model": "m", "messages": [{"role": "user", "content": "[INST] hi"}],
                                  "stream": False, "user": "me", "logit_bias": {}}),
        "chat_plain.json": (7, {"model": "m", "messages": [{"role": "user", "content": "plain"}],
                                "n": 128, "best_of": 128, "temperature": 0}),
    }
    for name, (selector, body) in bodies.items():
        write("fuzz_request_body", name, bytes([selector]) + json.dumps(body).encode())


if __name__ == "__main__":
    main()
