// lotus — lotus-tool report: the HTML page (one self-contained file, works offline)
// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "report/data.hpp"

namespace lotus_tool {

class output_file;
struct finding;

/// The whole page: the findings (compute_findings's, drawn once by the caller), tables and the
/// data for the charts, with Chart.js, dygraphs and the page script embedded. When the script has
/// drawn every chart it sets `data-lotus-rendered="1"` on <html>; a chart that fails shows its
/// error in #lotus-errors and counts it in `data-lotus-errors`. The page is written to `out` as it
/// is produced (never held whole in memory).
void write_report_page(const report_data& d, const std::vector<finding>& findings,
                       output_file& out);

/// HTML-escapes text (& < > ").
std::string escape_html(const std::string& s);
/// The page's Content-Security-Policy: only its own scripts, by SHA-256 hash.
std::string report_csp();
/// Base64 of the SHA-256 of `data` (the CSP's hash form).
std::string sha256_base64(std::string_view data);

}  // namespace lotus_tool
