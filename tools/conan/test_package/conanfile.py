# SPDX-License-Identifier: MIT
"""`conan create`'s test: a traced program built against the package writes its records."""
import glob
import os

from conan import ConanFile
from conan.tools.build import can_run
from conan.tools.cmake import CMake, cmake_layout


class LotusTestConan(ConanFile):
    settings = "os", "arch", "compiler", "build_type"
    generators = "CMakeDeps", "CMakeToolchain"

    def requirements(self):
        self.requires(self.tested_reference_str)

    def layout(self):
        cmake_layout(self)

    def build(self):
        cmake = CMake(self)
        cmake.configure()
        cmake.build()

    def test(self):
        if not can_run(self):
            return
        trace = os.path.join(self.build_folder, "trace")
        for f in glob.glob(os.path.join(trace, "*")):
            os.remove(f)
        exe = os.path.join(self.cpp.build.bindir, "test_package")
        self.run(f"LOTUS_LOG_FILE={os.path.join(trace, 'lotustrace_log')} {exe}", env="conanrun")
        files = glob.glob(os.path.join(trace, "lotustrace_log_worker_pid_*"))
        rows = open(files[0]).read().splitlines() if len(files) == 1 else []
        ops = sum(r.startswith("SNormalize,") for r in rows)
        batches = sum(r.startswith("SBatchPreprocessed_") for r in rows)
        if ops != 4 or batches != 4:
            raise Exception(f"test_package: expected 4 SNormalize and 4 SBatchPreprocessed records in "
                            f"{files}, got {ops} and {batches}")
        self.output.success(f"test_package: {len(rows)} records in {files[0]}")
