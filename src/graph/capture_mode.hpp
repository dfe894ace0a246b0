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

/// Who may issue work onto a capture's streams while it runs (docs/capture.md, "Exclusive
/// captures"). Since 0.5.
enum class CaptureStreams : std::uint8_t {
  /// Other code may issue onto them too (raw driver calls, libraries, other threads): tether
  /// issues each operation with its own stream call and then identifies the node it made from the
  /// graph (a handle is empty where that cannot be proven). The default.
  shared,
  /// The caller promises that until the capture ends only tether operations of this capture issue
  /// onto its streams (from any number of threads). tether then adds kernel (without launch
  /// attributes), memset, memcpy and host nodes to the capturing graph itself (cuGraphAddNode at
  /// the stream's capture dependencies, then cuStreamUpdateCaptureDependencies SET), so every such
  /// handle is exact and no identification query is made; event record and wait nodes and
  /// attributed launches keep their stream calls. Breaking the promise is not detected: another
  /// call issued onto the stream between tether's read of its dependencies and its update would
  /// drop out of the stream's order.
  exclusive,
};

class Capture;

}  // namespace tether
