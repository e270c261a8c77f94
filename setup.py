# SPDX-License-Identifier: MIT
"""Build of the `lotus` Python package for pip and wheels (metadata in pyproject.toml).

One build through the project's CMake: the extension lotus._lotus (described once, in
tools/python/CMakeLists.txt, from the same headers as every C++ user), lotus-tool, shipped as
lotus/bin/lotus-tool and started by the `lotus-tool` console script (as the cmake and ninja wheels ship
their binaries), and the injection libraries in lotus/lib/. LOTUS_BUILD_TOOL=0 builds the Python
package alone; LOTUS_NVTX=OFF builds without NVTX; lotus-tool is compiled with -O1
(LOTUS_TOOL_OPTIMIZE, default -O1: 38 % less CPU to build than Release's -O3, a tool 10-13 % slower;
LOTUS_TOOL_OPTIMIZE= builds it at -O3), and so is the extension (LOTUS_PYTHON_OPTIMIZE, default
-O1: a traced op from Python 1-3 % dearer; empty: -O3). lotus-tool needs the Debian packages of
`bash tools/scripts/install-deps.sh tool`.

The C++ side comes along (LOTUS_BUILD_CPP=0: not): `cmake --install` of the same build puts the
headers, liblotus.a and the CMake package config into the wheel's data (installed under the venv's
prefix: include/lotus/, lib/liblotus.a, lib/lotus/cmake/), so `find_package(lotus)` finds them with
-DCMAKE_PREFIX_PATH=<venv> (or the venv's bin/ on PATH). An sdist made by
tools/packaging/build-wheel.sh carries Chart.js and dygraphs (tools/packaging/vendor/js/), which
lotus-tool's report embeds, so its build needs no libjs-* package.

Progress: each stage and each compile step is one line on stderr with the seconds since the build
began (`lotus: [   2 s] configuring ...`, `lotus: [30.512 s] [5/25] Building ...`, ninja's own seconds);
pip shows them with -v.
"""
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
START = time.monotonic()


def progress(message):
    """One line on stderr, with the seconds since setup.py started (pip -v shows it)."""
    print(f"lotus: [{time.monotonic() - START:4.0f} s] {message}", file=sys.stderr, flush=True)


def version():
    text = (ROOT / "include" / "lotus" / "version.hpp").read_text()
    parts = []
    for part in ("MAJOR", "MINOR", "PATCH"):
        m = re.search(rf"#define LOTUS_VERSION_{part} (\d+)", text)
        if m is None:
            raise SystemExit(f"lotus: include/lotus/version.hpp has no LOTUS_VERSION_{part}")
        parts.append(m.group(1))
    return ".".join(parts)


class cmake_extension(Extension):
    """lotus._lotus, built by the project's CMake (tools/python/CMakeLists.txt describes it once)."""

    def __init__(self, name):
        super().__init__(name, sources=[])


class build_with_cmake(build_ext):
    """One CMake build of the whole package: the extension (target lotus_python, with NVTX where
    CMake finds the CUDA toolkit's nvtx3), lotus-tool and the injection libraries liblotus_itt.so
    and liblotus_nvtx.so (unless LOTUS_BUILD_TOOL=0), copied into the package: lotus/_lotus*.so,
    lotus/bin/lotus-tool, lotus/lib/."""

    def build_extension(self, ext):
        cmake = shutil.which("cmake")
        if cmake is None:
            raise SystemExit("lotus: cmake is needed to build the package (Debian: cmake; "
                             "bash tools/scripts/install-deps.sh python tool)")
        with_tool = os.environ.get("LOTUS_BUILD_TOOL", "1") != "0"
        with_cpp = os.environ.get("LOTUS_BUILD_CPP", "1") != "0"
        build = Path(self.build_temp).resolve() / "cmake"
        args = [cmake, "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                "-DLOTUS_BUILD_TESTS=OFF", "-DLOTUS_BUILD_EXAMPLES=OFF", "-DLOTUS_BUILD_BENCH=OFF",
                "-DLOTUS_BUILD_PYTHON=ON", "-DLOTUS_WITH_TORCH=OFF",
                f"-DLOTUS_INSTALL={'ON' if with_cpp else 'OFF'}",
                f"-DLOTUS_BUILD_TOOLS={'ON' if with_tool else 'OFF'}",
                # The tool at -O1 by default: 10-13 % slower than -O3, the install in about 94 s
                # on 2 cores (bench/README.md, "Build and first-run times").
                f"-DLOTUS_TOOL_OPTIMIZE={os.environ.get('LOTUS_TOOL_OPTIMIZE', '-O1')}",
                # The extension at -O1 too: a traced op from Python 1-3 % dearer, 16 G fewer
                # compiler instructions (LOTUS_PYTHON_OPTIMIZE= for the build type's -O3).
                f"-DLOTUS_PYTHON_OPTIMIZE={os.environ.get('LOTUS_PYTHON_OPTIMIZE', '-O1')}",
                f"-DPython3_EXECUTABLE={sys.executable}",
                f"-DLOTUS_NVTX={'OFF' if os.environ.get('LOTUS_NVTX', '').upper() == 'OFF' else 'AUTO'}"]
        try:  # pip's pybind11 (build isolation) or Debian's python3-pybind11: its CMake package
            import pybind11
            if Path(pybind11.get_cmake_dir(), "pybind11Config.cmake").is_file():
                args.append(f"-Dpybind11_DIR={pybind11.get_cmake_dir()}")
        except (ImportError, AttributeError):
            pass  # CMake looks in its own places (Debian's pybind11-dev)
        vendored = ROOT / "tools" / "packaging" / "vendor" / "js"  # in an sdist, not in git
        for var, name in (("LOTUS_CHARTJS_JS", "chart.min.js"), ("LOTUS_DYGRAPHS_JS", "dygraph.min.js"),
                          ("LOTUS_DYGRAPHS_CSS", "dygraph.min.css")):
            if (vendored / name).is_file():
                args.append(f"-D{var}={vendored / name}")
        env = dict(os.environ)
        if shutil.which("ninja"):
            args += ["-G", "Ninja"]
            # One line per step, with ninja's elapsed seconds and the step count.
            env.setdefault("NINJA_STATUS", "lotus: [%e s] [%f/%t] ")
        targets = ["lotus_python"] + (["lotus-tool"] if with_tool else []) + (["lotus"] if with_cpp else [])
        try:
            progress(f"configuring with CMake in {build}")
            subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
            progress(f"building {', '.join(targets)} on {os.cpu_count() or 2} cores "
                     f"(about 72 s on 2 quiet cores{'' if with_tool else ', less without the tool'})")
            subprocess.run([cmake, "--build", str(build), "--target", *targets, "-j",
                            str(os.cpu_count() or 2)], check=True, env=env,
                           stdout=sys.stderr.fileno())
            progress("built; copying into the package")
        except subprocess.CalledProcessError as e:
            raise SystemExit(f"lotus: the CMake build failed ({e}); install the Debian packages of "
                             "bash tools/scripts/install-deps.sh python tool, or set LOTUS_BUILD_TOOL=0 "
                             "to build the Python package without lotus-tool")
        built = build / "python" / "lotus"
        modules = sorted(built.glob("_lotus*.so"))
        if len(modules) != 1:
            raise SystemExit(f"lotus: expected one _lotus*.so in {built}, found {modules}")
        target = Path(self.get_ext_fullpath(ext.name)).resolve()
        package = target.parent
        package.mkdir(parents=True, exist_ok=True)
        shutil.copy2(modules[0], target)
        # Data files the CMake build copies into the package (lotus/mcp/FINDINGS.md, which
        # lotus.mcp's explain tool reads).
        for data in (Path("mcp") / "FINDINGS.md",):
            if not (built / data).is_file():
                raise SystemExit(f"lotus: the CMake build gave no {built / data}")
            (package / data).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(built / data, package / data)
        if (built / "lib").is_dir():  # liblotus_itt.so, liblotus_nvtx.so (lotus_python copies them)
            shutil.copytree(built / "lib", package / "lib", dirs_exist_ok=True)
        if with_tool:
            (package / "bin").mkdir(exist_ok=True)
            shutil.copy2(build / "tools" / "lotus-tool" / "lotus-tool", package / "bin" / "lotus-tool")
            os.chmod(package / "bin" / "lotus-tool", 0o755)
        if with_cpp:
            self.stage_cpp(cmake, build)

    def stage_cpp(self, cmake, build):
        """The headers, liblotus.a and the CMake package config, installed from the same build into a
        staging prefix and handed to install_data (the wheel's .data/data/: the venv's prefix)."""
        stage = build.parent / "cpp-prefix"
        shutil.rmtree(stage, ignore_errors=True)
        progress(f"installing the headers, liblotus.a and the CMake package config into {stage}")
        subprocess.run([cmake, "--install", str(build), "--prefix", str(stage), "--component", "Unspecified"],
                       check=True, stdout=subprocess.DEVNULL)
        files = {}
        for top in ("include", "lib", "share"):
            for f in sorted((stage / top).rglob("*")):
                if f.is_file() and (top != "lib" or f.name == "liblotus.a" or "cmake" in f.parts):
                    where = str(f.parent.relative_to(stage))
                    # lib/lotus/cmake/, not share/cmake/lotus/ (also where find_package looks,
                    # as deep, so the config's relative paths hold): pip uninstall removes the
                    # directories that hold its files, never an emptied parent, and a venv has
                    # no share/ of its own (share/, share/cmake/ would stay behind); lib/ is
                    # the venv's.
                    where = where.replace("share/cmake/lotus", "lib/lotus/cmake")
                    files.setdefault(where, []).append(str(f))
        # A file of lib/lotus/ itself (the licence): pip uninstall removes the directories that
        # hold files it installed, so lib/lotus/ goes too.
        files["lib/lotus"] = [str(ROOT / "LICENSE")]
        if "lib/lotus/cmake" not in files or "lib" not in files:
            raise SystemExit(f"lotus: cmake --install gave no liblotus.a or CMake package config in {stage}")
        self.distribution.data_files = sorted(files.items())


setup(
    version=version(),
    ext_modules=[cmake_extension("lotus._lotus")],
    cmdclass={"build_ext": build_with_cmake},
    # Not build/: that is where the README's CMake build lives.
    options={"build": {"build_base": "build-python"}},
    zip_safe=False,
)
