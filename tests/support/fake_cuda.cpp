// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// A fake libcuda.so.1 for the loader's tests. Its behaviour is chosen per call by the environment
// variable FAKE_CUDA_MODE, so one library covers every path of the loader:
//   ok            version 13.0, one device, every entry resolves
//   stub          cuInit returns CUDA_ERROR_STUB_LIBRARY (like the toolkit's link stub)
//   no_device     cuInit returns CUDA_ERROR_NO_DEVICE
//   zero_devices  cuInit succeeds, cuDeviceGetCount reports 0
//   init_error    cuInit returns CUDA_ERROR_OPERATING_SYSTEM
//   old           version 11.8
//   v12_3         version 12.3 (entries whose ABI is 13.0 are too old)
//   no_graphs     cuGetProcAddress does not find cuGraphCreate
#include <cuda.h>

#include <cstdlib>
#include <cstring>
#include <string_view>

namespace {
std::string_view mode() {
  const char* m = std::getenv("FAKE_CUDA_MODE");
  return m ? m : "ok";
}
CUresult fake_device_get_count(int* n) {
  *n = mode() == "zero_devices" ? 0 : 1;
  return CUDA_SUCCESS;
}
CUresult fake_device_get(CUdevice* d, int ordinal) {
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *d = 0;
  return CUDA_SUCCESS;
}
CUresult fake_get_error_name(CUresult r, const char** s) {
  *s = r == CUDA_ERROR_INVALID_VALUE ? "CUDA_ERROR_INVALID_VALUE" : "CUDA_ERROR_UNKNOWN";
  return CUDA_SUCCESS;
}
CUresult fake_get_error_string(CUresult r, const char** s) {
  *s = r == CUDA_ERROR_INVALID_VALUE ? "fake driver: invalid argument" : "fake driver: other error";
  return CUDA_SUCCESS;
}
CUresult fake_graph_create(CUgraph* g, unsigned flags) {
  if (flags != 0 || !g) return CUDA_ERROR_INVALID_VALUE;
  *g = reinterpret_cast<CUgraph>(0x1000);
  return CUDA_SUCCESS;
}
CUresult fake_generic() { return CUDA_ERROR_NOT_SUPPORTED; }
}  // namespace

extern "C" {
CUresult cuInit(unsigned) {
  std::string_view m = mode();
  if (m == "stub") return CUDA_ERROR_STUB_LIBRARY;
  if (m == "no_device") return CUDA_ERROR_NO_DEVICE;
  if (m == "init_error") return CUDA_ERROR_OPERATING_SYSTEM;
  return CUDA_SUCCESS;
}
CUresult cuDriverGetVersion(int* v) {
  std::string_view m = mode();
  *v = m == "old" ? 11080 : m == "v12_3" ? 12030 : 13000;
  return CUDA_SUCCESS;
}
CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int, cuuint64_t, CUdriverProcAddressQueryResult* found) {
  std::string_view s(symbol);
  void* p = reinterpret_cast<void*>(&fake_generic);
  if (s == "cuDeviceGetCount") p = reinterpret_cast<void*>(&fake_device_get_count);
  if (s == "cuDeviceGet") p = reinterpret_cast<void*>(&fake_device_get);
  if (s == "cuGetErrorName") p = reinterpret_cast<void*>(&fake_get_error_name);
  if (s == "cuGetErrorString") p = reinterpret_cast<void*>(&fake_get_error_string);
  if (s == "cuGraphCreate") {
    if (mode() == "no_graphs") {
      *pfn = nullptr;
      if (found) *found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
      return CUDA_ERROR_NOT_FOUND;
    }
    p = reinterpret_cast<void*>(&fake_graph_create);
  }
  *pfn = p;
  if (found) *found = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}
}
