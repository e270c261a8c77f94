# SPDX-License-Identifier: MIT
"""Build of the `lotus` Python package for pip and wheels (metadata in pyproject.toml).

Builds the extension lotus._lotus from the same headers as every C++ user (include/), and lotus-tool
with this repository's CMake build, shipped as lotus/bin/lotus-tool and started by the `lotus-tool`
console script (as the cmake and ninja wheels ship their binaries). LOTUS_BUILD_TOOL=0 builds the
Python package alone. lotus-tool needs the Debian packages of `bash tools/install-deps.sh tool`.
"""
import os
import re
import shutil
import subprocess
from pathlib import Path

from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


def nvtx_include():
    """The include directory holding NVTX v3's header-only nvtx3/ (the CUDA toolkit's), or None:
    with it the extension pushes NVTX ranges on lotus.configure(nvtx=True), and liblotus_nvtx.so
    is built and shipped in lotus/lib/. LOTUS_NVTX=OFF builds without; CUDA_HOME/CUDA_PATH first."""
    if os.environ.get("LOTUS_NVTX", "AUTO").upper() == "OFF":
        return None
    for base in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if base and (Path(base) / "include" / "nvtx3" / "nvToolsExt.h").is_file():
            return str(Path(base) / "include")
    return None


NVTX_INCLUDE = nvtx_include()


def version():
    text = (ROOT / "include" / "lotus" / "version.hpp").read_text()
    parts = []
    for part in ("MAJOR", "MINOR", "PATCH"):
        m = re.search(rf"#define LOTUS_VERSION_{part} (\d+)", text)
        if m is None:
            raise SystemExit(f"lotus: include/lotus/version.hpp has no LOTUS_VERSION_{part}")
        parts.append(m.group(1))
    return ".".join(parts)


class build_py_with_tool(build_py):
    """build_py, then lotus-tool built by CMake into the package's bin/ folder."""

    def run(self):
        super().run()
        if os.environ.get("LOTUS_BUILD_TOOL", "1") == "0":
            return
        cmake = shutil.which("cmake")
        if cmake is None:
            raise SystemExit("lotus: cmake is needed to build lotus-tool (bash tools/install-deps.sh "
                             "tool), or set LOTUS_BUILD_TOOL=0 to install the Python package alone")
        build = Path(self.get_finalized_command("build").build_temp).resolve() / "lotus-tool"
        args = [cmake, "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                "-DLOTUS_BUILD_TESTS=OFF", "-DLOTUS_BUILD_EXAMPLES=OFF", "-DLOTUS_BUILD_BENCH=OFF",
                "-DLOTUS_BUILD_PYTHON=OFF", "-DLOTUS_WITH_TORCH=OFF", "-DLOTUS_INSTALL=OFF",
                "-DLOTUS_BUILD_TOOLS=ON"]
        if shutil.which("ninja"):
            args += ["-G", "Ninja"]
        try:
            subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
            targets = ["lotus-tool", "lotus_itt"] + (["lotus_nvtx"] if NVTX_INCLUDE else [])
            subprocess.run([cmake, "--build", str(build), "--target", *targets, "-j",
                            str(os.cpu_count() or 2)], check=True)
        except subprocess.CalledProcessError as e:
            raise SystemExit(f"lotus: building lotus-tool failed ({e}); install its Debian packages "
                             "(bash tools/install-deps.sh tool), or set LOTUS_BUILD_TOOL=0 to install "
                             "the Python package alone")
        dest = Path(self.build_lib) / "lotus" / "bin"
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2(build / "tools" / "lotus-tool" / "lotus-tool", dest / "lotus-tool")
        os.chmod(dest / "lotus-tool", 0o755)
        nvtx = build / "tools" / "nvtx" / "liblotus_nvtx.so"
        if NVTX_INCLUDE and nvtx.is_file():  # lotus.nvtx_injection_path()
            (Path(self.build_lib) / "lotus" / "lib").mkdir(parents=True, exist_ok=True)
            shutil.copy2(nvtx, Path(self.build_lib) / "lotus" / "lib" / "liblotus_nvtx.so")
        itt = build / "tools" / "itt" / "liblotus_itt.so"
        if itt.is_file():  # lotus.itt_collector_path()
            (Path(self.build_lib) / "lotus" / "lib").mkdir(parents=True, exist_ok=True)
            shutil.copy2(itt, Path(self.build_lib) / "lotus" / "lib" / "liblotus_itt.so")


setup(
    version=version(),
    ext_modules=[
        Pybind11Extension("lotus._lotus", ["tools/python/_lotus.cpp"],
                          include_dirs=["include"] + ([NVTX_INCLUDE] if NVTX_INCLUDE else []),
                          define_macros=[("LOTUS_WITH_NVTX", "1")] if NVTX_INCLUDE else [],
                          cxx_std=17, libraries=["dl"], extra_compile_args=["-pthread"],
                          extra_link_args=["-pthread"]),
    ],
    cmdclass={"build_ext": build_ext, "build_py": build_py_with_tool},
    # Not build/: that is where the README's CMake build lives.
    options={"build": {"build_base": "build-python"}},
    zip_safe=False,
)
