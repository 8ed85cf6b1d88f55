// Sampling kernel lab: the GPU "sample_tokens" kernel (kernels/cuda/sampling/sampling.cu)
//   1. checked against the CPU kernel, its reference: the same tokens and logprobs for rows of
//      every kind (greedy with penalties, temperature, top-k, top-p, min-p, logprobs);
//   2. timed at a Llama-3 vocabulary (128256) for batches of 1 to 128 rows, per kind of row, with
//      the bytes it must move at least (the logits read once, the scratch row written once) and
//      the GB/s that makes against the copy bandwidth measured first. Versions tried: sorting
//      each row (a radix sort per row) lost to building the top-k/top-p threshold's order key
//      bit by bit, 32 passes over a row that stays in L2.
// Exits non-zero when a check fails.
//
//   sampling_lab [--device cuda:N] [--quick] [--skip-timing]
#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "bench/lab_harness.h"
#include "engine/sampler.h"
#include "runtime/check.h"

namespace tessera::lab {
namespace {

struct RowKind {
  const char* name;
  SamplingParams params;
};

std::vector<RowKind> row_kinds() {
  std::vector<RowKind> kinds(5);
  kinds[0].name = "temperature 0.8";
  kinds[0].params.temperature = 0.8;
  kinds[1].name = "top_k 50, top_p 0.9";
  kinds[1].params.top_k = 50;
  kinds[1].params.top_p = 0.9;
  kinds[2].name = "min_p 0.05";
  kinds[2].params.min_p = 0.05;
  kinds[3].name = "greedy + penalties";
  kinds[3].params.temperature = 0;
  kinds[3].params.repetition_penalty = 1.2;
  kinds[3].params.frequency_penalty = 0.5;
  kinds[4].name = "greedy + 5 logprobs";
  kinds[4].params.temperature = 0;
  kinds[4].params.logprobs = 5;
  return kinds;
}

std::vector<SamplingRow> rows_of(const SamplingParams& params, int64_t count,
                                 const std::vector<int32_t>& history) {
  std::vector<SamplingRow> rows;
  for (int64_t i = 0; i < count; ++i)
    rows.push_back(SamplingRow{&params, static_cast<uint64_t>(i) + 17, i, history, history});
  return rows;
}

int check(LabRandom& random, const std::vector<RowKind>& kinds) {
  int failures = 0;
  Tensor logits = random.uniform({16, 32000}, DType::f32, -8.0, 8.0);
  Tensor host = logits.to(kCPU);
  std::vector<int32_t> history = {5, 5, 9, 31999, 100};
  for (const RowKind& kind : kinds) {
    std::vector<SamplingRow> rows = rows_of(kind.params, 16, history);
    std::vector<SampledToken> want = sample_tokens(host, rows);
    std::vector<SampledToken> got = sample_tokens(logits, rows);
    int wrong = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      wrong += got[i].id != want[i].id || std::abs(got[i].logprob - want[i].logprob) > 1e-4;
      for (size_t k = 0; k < want[i].top.size(); ++k)
        wrong += got[i].top.at(k).id != want[i].top[k].id;
    }
    fmt::print("check {:<22} {}\n", kind.name,
               wrong == 0 ? "ok" : fmt::format("{} rows differ", wrong));
    failures += wrong != 0;
  }
  return failures;
}

}  // namespace
}  // namespace tessera::lab

int main(int argc, char** argv) {
  using namespace tessera;
  using namespace tessera::lab;
  return lab_main("sampling_lab", "the GPU sample_tokens kernel against the CPU kernel", argc, argv,
                  [](const LabArgs& args) {
                    LabRandom random(args.device);
                    std::vector<RowKind> kinds = row_kinds();
                    int failures = check(random, kinds);
                    if (args.skip_timing) return failures == 0 ? 0 : 1;
                    LabTimer timer(args.device, args.samples());
                    Ceilings ceilings = measure_ceilings(timer, random, false);
                    fmt::print("copy ceiling {:.0f} GB/s\n", ceilings.copy_gb_per_s);
                    const int64_t vocab = 128256;
                    std::vector<int32_t> history(64, 7);
                    fmt::print("{:<22} {:>5} {:>10} {:>9} {:>7}\n", "rows", "batch", "us", "GB/s",
                               "% copy");
                    for (const RowKind& kind : kinds)
                      for (int64_t batch : {1, 8, 32, 128}) {
                        Tensor logits = random.uniform({batch, vocab}, DType::f32, -8.0, 8.0);
                        std::vector<SamplingRow> rows = rows_of(kind.params, batch, history);
                        double us = timer.median_us([&](int) { sample_tokens(logits, rows); });
                        // At least: the logits read once and the scratch row written once.
                        double bytes = 2.0 * static_cast<double>(batch * vocab) * 4;
                        Achieved a = achieved(ceilings, bytes, 0, us);
                        fmt::print("{:<22} {:>5} {:>10.1f} {:>9.0f} {:>6.1f}%\n", kind.name, batch,
                                   us, a.gb_per_s / kGB, a.copy_percent);
                      }
                    return failures == 0 ? 0 : 1;
                  });
}
