// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"

TETHER_EXPORT namespace tether {

/// How a stream capture treats potentially unsafe driver calls (`CUstreamCaptureMode`; see
/// docs/capture.md, "Modes"). tether's own potentially unsafe calls (instantiate, synchronous
/// allocation, waits for other streams and events) run in RELAXED mode whatever the mode, so they
/// never invalidate a capture.
enum class CaptureMode {
  global = CU_STREAM_CAPTURE_MODE_GLOBAL,               ///< unsafe calls from any GLOBAL-mode thread invalidate it
  thread_local_ = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,  ///< only the capturing thread's unsafe calls do
  relaxed = CU_STREAM_CAPTURE_MODE_RELAXED,             ///< none do (ending it from another thread is allowed)
};

class Capture;

}  // namespace tether
