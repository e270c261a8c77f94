# SPDX-License-Identifier: MIT
"""Conan 2 recipe of lotus: the headers and liblotus.a (the runtime, compiled once), what a C++
program links; the same CMake build and install as `cmake --install` (no lotus-tool, no Python).
  conan create tools/conan --build=missing     # builds lotus, then test_package runs a traced program
A consumer: `requires = "lotus/0.1.0"`, then find_package(lotus CONFIG REQUIRED) and
target_link_libraries(app PRIVATE lotus::lotus) (CMakeDeps). No requirement of its own: offline."""
import os
import re

from conan import ConanFile
from conan.tools.cmake import CMake, CMakeToolchain, cmake_layout
from conan.tools.files import copy, load

ROOT = os.path.join("..", "..")  # the repository, relative to this recipe


class LotusConan(ConanFile):
    name = "lotus"
    license = "MIT"
    description = "LotusTrace for C++ ML preprocessing pipelines: Lotus's trace files from LOTUS_SCOPE"
    topics = ("profiling", "tracing", "machine-learning", "dataloader")
    settings = "os", "arch", "compiler", "build_type"
    options = {"fPIC": [True, False]}
    default_options = {"fPIC": True}
    package_type = "static-library"

    def set_version(self):
        text = load(self, os.path.join(self.recipe_folder, ROOT, "include", "lotus", "version.hpp"))
        self.version = ".".join(re.search(rf"#define LOTUS_VERSION_{p} (\d+)", text).group(1)
                                for p in ("MAJOR", "MINOR", "PATCH"))

    def export_sources(self):
        src = os.path.join(self.recipe_folder, ROOT)
        for pattern in ("CMakeLists.txt", "LICENSE", "include/*", "tools/cmake/*"):
            copy(self, pattern, src, self.export_sources_folder)

    def validate(self):
        if self.settings.os != "Linux":
            from conan.errors import ConanInvalidConfiguration
            raise ConanInvalidConfiguration("lotus is Linux only (gettid, pipe2, /proc)")

    def layout(self):
        cmake_layout(self)

    def generate(self):
        tc = CMakeToolchain(self)
        for option in ("TESTS", "EXAMPLES", "BENCH", "TOOLS", "PYTHON"):
            tc.cache_variables[f"LOTUS_BUILD_{option}"] = False
        tc.cache_variables["LOTUS_INSTALL"] = True
        tc.cache_variables["LOTUS_WITH_TORCH"] = False
        tc.cache_variables["LOTUS_NVTX"] = "OFF"
        tc.generate()

    def build(self):
        cmake = CMake(self)
        cmake.configure()
        cmake.build()

    def package(self):
        CMake(self).install()
        copy(self, "LICENSE", self.source_folder, os.path.join(self.package_folder, "licenses"))

    def package_info(self):
        # What lotus's own lotusConfig.cmake exports, as CMakeDeps targets of the same names.
        self.cpp_info.set_property("cmake_file_name", "lotus")
        headers = self.cpp_info.components["headers"]
        headers.set_property("cmake_target_name", "lotus::headers")
        headers.system_libs = ["pthread", "dl"]
        lib = self.cpp_info.components["lotus"]
        lib.set_property("cmake_target_name", "lotus::lotus")
        lib.libs = ["lotus"]
        lib.requires = ["headers"]
        # Every file that includes lotus carries a weak runtime entry: -u makes the linker take the
        # runtime's object from the archive (as lotusTargets.cmake's INTERFACE link option does).
        lib.exelinkflags = lib.sharedlinkflags = ["-Wl,-u,lotus_runtime_v0"]
