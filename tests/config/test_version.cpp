// lotus — the version macros agree with the CMake project version
// SPDX-License-Identifier: MIT
#include <string>

#include "catch.hpp"
#include "lotus/lotus.hpp"

TEST_CASE("LOTUS_VERSION matches the CMake project version", "[config][version]") {
  CHECK(std::string(LOTUS_VERSION_STRING) == LOTUS_PROJECT_VERSION);
  CHECK(LOTUS_VERSION ==
        LOTUS_VERSION_MAJOR * 10000 + LOTUS_VERSION_MINOR * 100 + LOTUS_VERSION_PATCH);
}
