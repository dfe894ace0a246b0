// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
// A shared library that is not a CUDA driver: it exports cuInit but no cuGetProcAddress_v2.
extern "C" int cuInit(unsigned) { return 0; }
