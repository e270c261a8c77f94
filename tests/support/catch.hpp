// lotus — picks the Catch2 header of whichever major version is installed
// SPDX-License-Identifier: MIT
#pragma once

#if __has_include(<catch2/catch_test_macros.hpp>)
#  include <catch2/catch_approx.hpp>
#  include <catch2/catch_test_macros.hpp>
#else
#  include <catch2/catch.hpp>
#endif
