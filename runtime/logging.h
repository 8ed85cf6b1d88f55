// Where log lines go: stderr, so that a program's stdout carries only its output (the generated
// text, a table) and `tessera generate > story.txt` holds the story alone, as with llama.cpp and
// every Unix tool. Each program's main calls this first.
#pragma once

namespace tessera {

// Makes spdlog's default logger write to stderr (keeping its name, level and pattern).
void log_to_stderr();

// Sets the log level from TESSERA_LOG_LEVEL when it is set: trace, debug, info (the default),
// warn, error, critical or off (debug shows, for instance, the per-shape GEMM path timings).
// Throws an Error naming the variable and the valid levels for any other value.
void set_log_level_from_environment();

}  // namespace tessera
