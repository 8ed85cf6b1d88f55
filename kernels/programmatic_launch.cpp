#include "runtime/backend/programmatic_launch.h"

namespace tessera {

namespace {
thread_local bool enabled = false;
}  // namespace

bool programmatic_launch_enabled() {
  return enabled;
}

ProgrammaticLaunchScope::ProgrammaticLaunchScope(bool on) : previous_(enabled) {
  enabled = on;
}

ProgrammaticLaunchScope::~ProgrammaticLaunchScope() {
  enabled = previous_;
}

}  // namespace tessera
