// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
import tether;
// The consumer project's program: `import tether;` first, then only <cstdio> (which declares no
// C++ library type), so that a tether template that needs a standard declaration its importer did
// not include fails to build here. It opens the driver TETHER_DRIVER selects and, where there is
// one, runs a graph whose memset node owns its buffer.
#include <cstdio>

int main() {
  try {
    tether::Runtime rt = tether::Runtime::open();
    tether::Context ctx = rt.context(0);
    tether::Stream stream = ctx.make_stream();
    tether::SharedBuffer<float> x = ctx.alloc<float>(256).share();
    tether::Graph g{ctx};
    g.edit([&](tether::Edit& e) { e.memset(x, 7.0f); });
    g.instantiate().launch(stream);
    stream.synchronize();
    float last[1] = {0.0f};
    x.copy_to(last);
    std::printf("consumer: %s, x = %g\n", rt.describe().c_str(), static_cast<double>(last[0]));
    return last[0] == 7.0f ? 0 : 1;
  } catch (const tether::DriverUnavailable& e) {
    const auto reason = tether::to_string(e.reason());
    std::printf("consumer: no driver (%.*s)\n", static_cast<int>(reason.size()), reason.data());
  }
  return 0;
}
