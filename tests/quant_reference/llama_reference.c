// The llama.cpp side of Tessera's quantized-weight tests and benchmark, built by
// make_references.sh against the prebuilt libraries node-llama-cpp ships (libggml-base, libllama)
// and the llama.cpp headers of the same release. Tests never run it: they read what it wrote.
//   dequantize OUT_DIR            per type: random blocks with edge scales (.blocks) and
//                                 llama.cpp's dequantize_row_* of them (.f32)
//   synthetic OUT TOKENIZER_GGUF VOCAB DIM LAYERS HEADS KV_HEADS HEAD_DIM FF SEED
//             [EXPERTS USED [ARCH]]
//                                 an F32 llama GGUF of random weights with the first VOCAB tokens
//                                 of TOKENIZER_GGUF's tokenizer (0: all of them); with EXPERTS, a
//                                 Mixtral-style mixture: each layer's MLP is EXPERTS experts of FF
//                                 (stacked ffn_*_exps, router ffn_gate_inp), USED per token; ARCH
//                                 qwen3moe writes Qwen3-MoE (per-head q/k norms) instead of llama
//   quantize IN OUT FTYPE         llama_model_quantize (FTYPE as llama_ftype: 7 Q8_0, 15 Q4_K_M)
//   generate MODEL THREADS N ID...  greedy: prints the N generated ids; each step's runner-up id;
//                                 each step's gap between the top two logits; the decode tokens/s;
//                                 "text: " and the generated tokens' text
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-backend.h"
#include "ggml.h"
#include "gguf.h"
#include "llama.h"

typedef void (*dequantize_fn)(const void* blocks, float* out, int64_t count);
void dequantize_row_q4_0(const void*, float*, int64_t);
void dequantize_row_q4_1(const void*, float*, int64_t);
void dequantize_row_q5_0(const void*, float*, int64_t);
void dequantize_row_q5_1(const void*, float*, int64_t);
void dequantize_row_q8_0(const void*, float*, int64_t);
void dequantize_row_q2_K(const void*, float*, int64_t);
void dequantize_row_q3_K(const void*, float*, int64_t);
void dequantize_row_q4_K(const void*, float*, int64_t);
void dequantize_row_q5_K(const void*, float*, int64_t);
void dequantize_row_q6_K(const void*, float*, int64_t);

struct format {
  const char* name;
  int elements, bytes;
  int scale_offsets[2];  // byte offsets of the f16 scale fields (d, and dmin/m or -1)
  dequantize_fn dequantize;
};

static const struct format kFormats[] = {
    {"q4_0", 32, 18, {0, -1}, dequantize_row_q4_0}, {"q4_1", 32, 20, {0, 2}, dequantize_row_q4_1},
    {"q5_0", 32, 22, {0, -1}, dequantize_row_q5_0}, {"q5_1", 32, 24, {0, 2}, dequantize_row_q5_1},
    {"q8_0", 32, 34, {0, -1}, dequantize_row_q8_0}, {"q2_k", 256, 84, {80, 82}, dequantize_row_q2_K},
    {"q3_k", 256, 110, {108, -1}, dequantize_row_q3_K},
    {"q4_k", 256, 144, {0, 2}, dequantize_row_q4_K},
    {"q5_k", 256, 176, {0, 2}, dequantize_row_q5_K},
    {"q6_k", 256, 210, {208, -1}, dequantize_row_q6_K}};

// Edge scales as f16 bits: zero, negative zero, the smallest subnormal, a large subnormal, the
// largest finite, its negative, one, then random finite values.
static const uint16_t kEdgeScales[] = {0x0000, 0x8000, 0x0001, 0x03ff, 0x7bff, 0xfbff, 0x3c00};
#define kBlocksPerType 10

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t next_random(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
static uint16_t random_finite_half(void) {
  for (;;) {
    const uint16_t bits = (uint16_t)next_random();
    if (((bits >> 10) & 0x1f) != 0x1f) return bits;
  }
}
static double random_normal(void) {
  const double u = ((double)(next_random() >> 11) + 0.5) / 9007199254740992.0;
  const double v = ((double)(next_random() >> 11) + 0.5) / 9007199254740992.0;
  return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

static void write_file(const char* path, const void* data, size_t bytes) {
  FILE* file = fopen(path, "wb");
  if (!file || fwrite(data, 1, bytes, file) != bytes) {
    fprintf(stderr, "cannot write %s\n", path);
    exit(1);
  }
  fclose(file);
}

static int dequantize_fixtures(const char* out_dir) {
  for (size_t f = 0; f < sizeof(kFormats) / sizeof(kFormats[0]); ++f) {
    const struct format* format = &kFormats[f];
    uint8_t* blocks = malloc((size_t)format->bytes * kBlocksPerType);
    float* values = malloc(sizeof(float) * format->elements * kBlocksPerType);
    for (int b = 0; b < kBlocksPerType; ++b) {
      uint8_t* block = blocks + (size_t)b * format->bytes;
      for (int i = 0; i < format->bytes; ++i) block[i] = (uint8_t)next_random();
      for (int s = 0; s < 2; ++s) {
        if (format->scale_offsets[s] < 0) continue;
        const int edges = sizeof(kEdgeScales) / sizeof(kEdgeScales[0]);
        // The second scale walks the edges in another order, so pairs differ.
        const int pick = s == 0 ? b : (b * 3 + 1) % kBlocksPerType;
        const uint16_t bits = pick < edges ? kEdgeScales[pick] : random_finite_half();
        memcpy(block + format->scale_offsets[s], &bits, 2);
      }
    }
    format->dequantize(blocks, values, (int64_t)format->elements * kBlocksPerType);
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.blocks", out_dir, format->name);
    write_file(path, blocks, (size_t)format->bytes * kBlocksPerType);
    snprintf(path, sizeof(path), "%s/%s.f32", out_dir, format->name);
    write_file(path, values, sizeof(float) * format->elements * kBlocksPerType);
    free(blocks);
    free(values);
  }
  return 0;
}

// A random matrix [rows, cols] (ne0 = cols) of N(0, scale^2), named `name`.
static void add_matrix(struct gguf_context* gguf, struct ggml_context* ctx, const char* name,
                       int64_t cols, int64_t rows, double scale) {
  struct ggml_tensor* tensor = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, cols, rows);
  ggml_set_name(tensor, name);
  float* data = (float*)tensor->data;
  for (int64_t i = 0; i < cols * rows; ++i) data[i] = (float)(scale * random_normal());
  gguf_add_tensor(gguf, tensor);
}

// `experts` random matrices [rows, cols] stacked (ne2 = experts), as llama.cpp's ffn_*_exps.
static void add_experts(struct gguf_context* gguf, struct ggml_context* ctx, const char* name,
                        int64_t cols, int64_t rows, int64_t experts, double scale) {
  struct ggml_tensor* tensor = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, cols, rows, experts);
  ggml_set_name(tensor, name);
  float* data = (float*)tensor->data;
  for (int64_t i = 0; i < cols * rows * experts; ++i) data[i] = (float)(scale * random_normal());
  gguf_add_tensor(gguf, tensor);
}

static void add_norm(struct gguf_context* gguf, struct ggml_context* ctx, const char* name,
                     int64_t size) {
  struct ggml_tensor* tensor = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, size);
  ggml_set_name(tensor, name);
  float* data = (float*)tensor->data;
  for (int64_t i = 0; i < size; ++i) data[i] = (float)(1.0 + 0.1 * random_normal());
  gguf_add_tensor(gguf, tensor);
}

static int synthetic_model(char** args) {
  const char* out = args[0];
  struct gguf_init_params tokenizer_params = {true, NULL};
  struct gguf_context* tokenizer = gguf_init_from_file(args[1], tokenizer_params);
  if (!tokenizer) {
    fprintf(stderr, "cannot read %s\n", args[1]);
    return 1;
  }
  const int64_t dim = atoll(args[3]), layers = atoll(args[4]), heads = atoll(args[5]);
  const int64_t kv_heads = atoll(args[6]), head_dim = atoll(args[7]), ff = atoll(args[8]);
  rng_state ^= (uint64_t)atoll(args[9]) * 0x2545f4914f6cdd1dull;
  const int64_t experts = args[10] != NULL ? atoll(args[10]) : 0;
  const int64_t experts_used = experts > 0 && args[11] != NULL ? atoll(args[11]) : 0;
  const char* arch = experts > 0 && args[11] != NULL && args[12] != NULL ? args[12] : "llama";
  const int qwen3moe = strcmp(arch, "qwen3moe") == 0;
  if (!qwen3moe && strcmp(arch, "llama") != 0) {
    fprintf(stderr, "unknown architecture %s: llama or qwen3moe\n", arch);
    return 1;
  }
  const int64_t token_key = gguf_find_key(tokenizer, "tokenizer.ggml.tokens");
  const int64_t full_vocab = (int64_t)gguf_get_arr_n(tokenizer, token_key);
  const int64_t vocab = atoll(args[2]) > 0 && atoll(args[2]) < full_vocab ? atoll(args[2]) : full_vocab;

  struct gguf_context* gguf = gguf_init_empty();
  gguf_set_kv(gguf, tokenizer);  // tokenizer.*, then the llama keys replace the rest
  for (int64_t i = gguf_get_n_kv(gguf) - 1; i >= 0; --i) {
    const char* key = gguf_get_key(gguf, i);
    if (strncmp(key, "tokenizer.", 10) != 0) gguf_remove_key(gguf, key);
  }
  if (vocab < full_vocab) {  // the first `vocab` tokens, with their scores and types
    const char** tokens = malloc(sizeof(char*) * (size_t)vocab);
    for (int64_t i = 0; i < vocab; ++i) tokens[i] = gguf_get_arr_str(tokenizer, token_key, (size_t)i);
    gguf_set_arr_str(gguf, "tokenizer.ggml.tokens", tokens, (size_t)vocab);
    free(tokens);
    const int64_t scores = gguf_find_key(tokenizer, "tokenizer.ggml.scores");
    if (scores >= 0)
      gguf_set_arr_data(gguf, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32,
                        gguf_get_arr_data(tokenizer, scores), (size_t)vocab);
    const int64_t types = gguf_find_key(tokenizer, "tokenizer.ggml.token_type");
    if (types >= 0)
      gguf_set_arr_data(gguf, "tokenizer.ggml.token_type", GGUF_TYPE_INT32,
                        gguf_get_arr_data(tokenizer, types), (size_t)vocab);
  }
  gguf_set_val_str(gguf, "general.architecture", arch);
  char key[128];
#define ARCH_KEY(name) (snprintf(key, sizeof(key), "%s." name, arch), key)
  gguf_set_val_str(gguf, "general.name", "tessera-synthetic");
  gguf_set_val_u32(gguf, ARCH_KEY("context_length"), 512);
  gguf_set_val_u32(gguf, ARCH_KEY("embedding_length"), (uint32_t)dim);
  gguf_set_val_u32(gguf, ARCH_KEY("block_count"), (uint32_t)layers);
  gguf_set_val_u32(gguf, ARCH_KEY("feed_forward_length"), (uint32_t)ff);
  gguf_set_val_u32(gguf, ARCH_KEY("attention.head_count"), (uint32_t)heads);
  gguf_set_val_u32(gguf, ARCH_KEY("attention.head_count_kv"), (uint32_t)kv_heads);
  gguf_set_val_u32(gguf, ARCH_KEY("attention.key_length"), (uint32_t)head_dim);
  gguf_set_val_u32(gguf, ARCH_KEY("attention.value_length"), (uint32_t)head_dim);
  gguf_set_val_u32(gguf, ARCH_KEY("rope.dimension_count"), (uint32_t)head_dim);
  gguf_set_val_f32(gguf, ARCH_KEY("attention.layer_norm_rms_epsilon"), 1e-5f);
  gguf_set_val_f32(gguf, ARCH_KEY("rope.freq_base"), 10000.0f);
  gguf_set_val_u32(gguf, "general.file_type", 0);
  if (experts > 0) {
    gguf_set_val_u32(gguf, ARCH_KEY("expert_count"), (uint32_t)experts);
    gguf_set_val_u32(gguf, ARCH_KEY("expert_used_count"), (uint32_t)experts_used);
    if (qwen3moe) gguf_set_val_u32(gguf, ARCH_KEY("expert_feed_forward_length"), (uint32_t)ff);
  }

  const size_t params = (size_t)(vocab * dim + dim +
                                 layers * (2 * dim + 2 * dim * heads * head_dim +
                                           2 * dim * kv_heads * head_dim +
                                           (experts > 0 ? experts : 1) * 3 * dim * ff +
                                           experts * dim + 2 * head_dim));
  struct ggml_init_params init = {params * sizeof(float) + (size_t)(16 + 12 * layers) * 1024,
                                  NULL, false};
  struct ggml_context* ctx = ggml_init(init);
  // A small embedding (tied: also the LM head) under a strong MLP and a weak attention output:
  // the next token is mostly a random function of the current one, not of a slowly changing
  // average over the context, so the greedy picks' margins do not drift through zero.
  add_matrix(gguf, ctx, "token_embd.weight", dim, vocab, 0.1);
  char name[128];
  for (int64_t l = 0; l < layers; ++l) {
    snprintf(name, sizeof(name), "blk.%lld.attn_norm.weight", (long long)l);
    add_norm(gguf, ctx, name, dim);
    snprintf(name, sizeof(name), "blk.%lld.attn_q.weight", (long long)l);
    add_matrix(gguf, ctx, name, dim, heads * head_dim, 1.0 / sqrt((double)dim));
    snprintf(name, sizeof(name), "blk.%lld.attn_k.weight", (long long)l);
    add_matrix(gguf, ctx, name, dim, kv_heads * head_dim, 1.0 / sqrt((double)dim));
    snprintf(name, sizeof(name), "blk.%lld.attn_v.weight", (long long)l);
    add_matrix(gguf, ctx, name, dim, kv_heads * head_dim, 1.0 / sqrt((double)dim));
    if (qwen3moe) {
      snprintf(name, sizeof(name), "blk.%lld.attn_q_norm.weight", (long long)l);
      add_norm(gguf, ctx, name, head_dim);
      snprintf(name, sizeof(name), "blk.%lld.attn_k_norm.weight", (long long)l);
      add_norm(gguf, ctx, name, head_dim);
    }
    snprintf(name, sizeof(name), "blk.%lld.attn_output.weight", (long long)l);
    add_matrix(gguf, ctx, name, heads * head_dim, dim, 0.2 / sqrt((double)(heads * head_dim)));
    snprintf(name, sizeof(name), "blk.%lld.ffn_norm.weight", (long long)l);
    add_norm(gguf, ctx, name, dim);
    if (experts > 0) {  // a router of strong logits, so that top-k choices have margins
      snprintf(name, sizeof(name), "blk.%lld.ffn_gate_inp.weight", (long long)l);
      add_matrix(gguf, ctx, name, dim, experts, 3.0 / sqrt((double)dim));
      snprintf(name, sizeof(name), "blk.%lld.ffn_gate_exps.weight", (long long)l);
      add_experts(gguf, ctx, name, dim, ff, experts, 1.0 / sqrt((double)dim));
      snprintf(name, sizeof(name), "blk.%lld.ffn_up_exps.weight", (long long)l);
      add_experts(gguf, ctx, name, dim, ff, experts, 1.0 / sqrt((double)dim));
      snprintf(name, sizeof(name), "blk.%lld.ffn_down_exps.weight", (long long)l);
      add_experts(gguf, ctx, name, ff, dim, experts, 3.0 / sqrt((double)ff));
      continue;
    }
    snprintf(name, sizeof(name), "blk.%lld.ffn_gate.weight", (long long)l);
    add_matrix(gguf, ctx, name, dim, ff, 1.0 / sqrt((double)dim));
    snprintf(name, sizeof(name), "blk.%lld.ffn_up.weight", (long long)l);
    add_matrix(gguf, ctx, name, dim, ff, 1.0 / sqrt((double)dim));
    snprintf(name, sizeof(name), "blk.%lld.ffn_down.weight", (long long)l);
    add_matrix(gguf, ctx, name, ff, dim, 3.0 / sqrt((double)ff));
  }
  add_norm(gguf, ctx, "output_norm.weight", dim);
  if (!gguf_write_to_file(gguf, out, false)) {
    fprintf(stderr, "cannot write %s\n", out);
    return 1;
  }
  return 0;
}

static int quantize(char** args) {
  struct llama_model_quantize_params params = llama_model_quantize_default_params();
  params.ftype = (enum llama_ftype)atoi(args[2]);
  params.nthread = 2;
  return llama_model_quantize(args[0], args[1], &params) == 0 ? 0 : 1;
}

static double seconds_now(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

static int generate(int count, char** args) {
  const int threads = atoi(args[1]), steps = atoi(args[2]);
  llama_token prompt[512];
  int prompt_length = 0;
  for (int i = 3; i < count && prompt_length < 512; ++i) prompt[prompt_length++] = atoi(args[i]);
  struct llama_model_params model_params = llama_model_default_params();
  model_params.n_gpu_layers = 0;
  struct llama_model* model = llama_model_load_from_file(args[0], model_params);
  if (!model) return 1;
  struct llama_context_params context_params = llama_context_default_params();
  context_params.n_ctx = 512;
  context_params.n_batch = 512;
  context_params.n_threads = threads;
  context_params.n_threads_batch = threads;
  struct llama_context* context = llama_init_from_model(model, context_params);
  const int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  if (llama_decode(context, llama_batch_get_one(prompt, prompt_length)) != 0) return 1;
  double decode_seconds = 0;
  llama_token* picks = malloc(sizeof(llama_token) * (size_t)steps);
  llama_token* runners_up = malloc(sizeof(llama_token) * (size_t)steps);
  float* gaps = malloc(sizeof(float) * (size_t)steps);
  for (int step = 0; step < steps; ++step) {
    const float* logits = llama_get_logits_ith(context, -1);
    llama_token best = 0;
    for (int v = 1; v < vocab; ++v)
      if (logits[v] > logits[best]) best = v;
    llama_token second = best == 0 ? 1 : 0;
    for (int v = 0; v < vocab; ++v)
      if (v != best && logits[v] > logits[second]) second = v;
    picks[step] = best;
    runners_up[step] = second;
    gaps[step] = logits[best] - logits[second];
    if (step + 1 == steps) break;
    const double start = seconds_now();
    if (llama_decode(context, llama_batch_get_one(&best, 1)) != 0) return 1;
    decode_seconds += seconds_now() - start;
  }
  for (int step = 0; step < steps; ++step) printf("%d%c", picks[step], step + 1 < steps ? ' ' : '\n');
  for (int step = 0; step < steps; ++step)
    printf("%d%c", runners_up[step], step + 1 < steps ? ' ' : '\n');
  for (int step = 0; step < steps; ++step) printf("%.4f%c", gaps[step], step + 1 < steps ? ' ' : '\n');
  printf("decode tokens/s %.2f\n", steps > 1 ? (steps - 1) / decode_seconds : 0.0);
  printf("text: ");
  for (int step = 0; step < steps; ++step) {
    char piece[256];
    const int length = llama_token_to_piece(llama_model_get_vocab(model), picks[step], piece,
                                            sizeof(piece), 0, false);
    if (length > 0) fwrite(piece, 1, (size_t)length, stdout);
  }
  printf("\n");
  free(picks);
  free(runners_up);
  free(gaps);
  llama_free(context);
  llama_model_free(model);
  return 0;
}

static void quiet_log(enum ggml_log_level level, const char* text, void* data) {
  (void)data;
  if (level >= GGML_LOG_LEVEL_WARN) fputs(text, stderr);
}

int main(int argc, char** argv) {
  if (argc >= 3 && strcmp(argv[1], "dequantize") == 0) return dequantize_fixtures(argv[2]);
  if ((argc == 12 || argc == 14 || argc == 15) && strcmp(argv[1], "synthetic") == 0)
    return synthetic_model(argv + 2);
  llama_log_set(quiet_log, NULL);
  ggml_backend_load_all_from_path(getenv("LLAMA_LIB_DIR"));
  llama_backend_init();
  if (argc >= 5 && strcmp(argv[1], "quantize") == 0) return quantize(argv + 2);
  if (argc >= 6 && strcmp(argv[1], "generate") == 0) return generate(argc - 2, argv + 2);
  fprintf(stderr, "usage: see the comment at the top of llama_reference.c\n");
  return 2;
}
