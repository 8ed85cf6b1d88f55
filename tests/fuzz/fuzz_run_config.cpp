// Fuzz target: a YAML run config and -O overrides: the input up to its first NUL byte is the
// file, each line after it one override. When the config loads, what a run derives from it
// (device, dtype, custom-op list, capture sizes, graph mode) is derived too.
#include "compile/custom_op_config.h"
#include "engine/config.h"
#include "engine/runner/run_setup.h"
#include "fuzz/fuzz_support.h"

using namespace tessera;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = fuzz::as_text(data, size);
  const size_t split = input.find('\0');
  const std::string path = fuzz::write_scratch_file("run.yaml", input.substr(0, split));
  std::vector<std::string> overrides;
  if (split != std::string_view::npos) {
    std::string_view rest = input.substr(split + 1);
    while (!rest.empty()) {
      const size_t end = rest.find('\n');
      overrides.emplace_back(rest.substr(0, end));
      rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    }
  }
  fuzz::expect_clean_failure(
      [&] {
        const EngineConfig config = load_run_config(path, overrides);
        const Device device = run_device(config.model);
        run_dtype(config.model, device);
        config.compilation.custom_op_config();
        config.compilation.resolved_capture_sizes(config.scheduler.max_num_batched_tokens);
        config.compilation.resolved_cudagraph_mode(!device.is_cpu());
      },
      {path, "override", "engine.", "compilation.", "device", "custom_ops"});
  return 0;
}
