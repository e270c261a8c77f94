// lotus — lotus-tool report: the files embedded into the page when the tool is built
// SPDX-License-Identifier: MIT
// Debian's Chart.js and dygraphs, and the page's own script and style; see
// tools/cmake/embed_assets.cmake.
#pragma once

#include <cstddef>
#include <string>

namespace lotus_tool {

/// A text file as consecutive chunks (the generated source cannot hold it as one literal).
struct asset {
  const char* const* parts;
  std::size_t count;
  void append_to(std::string& out) const {
    for (std::size_t i = 0; i < count; ++i) out += parts[i];
  }
};

namespace assets {
extern const asset chart_js;     ///< /usr/share/javascript/chart.js/chart.min.js (libjs-chart.js)
extern const asset dygraph_js;   ///< /usr/share/javascript/dygraphs/dygraph.min.js (libjs-dygraphs)
extern const asset dygraph_css;  ///< /usr/share/javascript/dygraphs/dygraph.min.css
extern const asset report_js;    ///< tools/lotus-tool/assets/report.js
extern const asset report_css;   ///< tools/lotus-tool/assets/report.css
}  // namespace assets

}  // namespace lotus_tool
