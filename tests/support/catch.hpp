// lotus — picks the Catch2 header of whichever major version is installed
// SPDX-License-Identifier: MIT
#pragma once

#if __has_include(<catch2/catch_test_macros.hpp>)
#  include <catch2/catch_approx.hpp>
#  include <catch2/catch_test_macros.hpp>
#  include <catch2/matchers/catch_matchers_string.hpp>
#  include <string>
// The tests use Catch2 v2's spellings: Approx at global scope, Catch::Contains.
using Catch::Approx;
namespace Catch {
inline Matchers::StringContainsMatcher Contains(const std::string& text) {
  return Matchers::ContainsSubstring(text);
}
}  // namespace Catch
#else
#  include <catch2/catch.hpp>
#endif
