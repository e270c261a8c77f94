# SPDX-License-Identifier: MIT
"""Installing the Python package as its users do: `cmake --install` (component python), and pip.

pip: a venv with the system site packages, `pip install --no-build-isolation` of a copy of the
checkout (not the build tree): the extension built from include/ and lotus-tool in V/bin, the same
version everywhere, a traced DataLoader run checked by that lotus-tool, a CMake project built
against the package config it installed, then `pip uninstall` removes all of it (the venv lists
as before the install: no file, no emptied directory left); `python3 -m build --wheel
--no-isolation` makes a wheel that installs into a second venv. Run from ctest
(python.cmake_install, python.pip)."""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

TRACED_RUN = """
import sys, torch, lotus, lotus.torch
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms as T
class AddOne:
    def __call__(self, x): return x + 1
class Seq(Dataset):
    def __init__(self): self.t = T.Compose([AddOne()])
    def __len__(self): return 8
    def __getitem__(self, i): return self.t(torch.tensor([float(i)]))
lotus.torch.instrument(log_file=sys.argv[1])
print(sum(float(b.sum()) for b in DataLoader(Seq(), batch_size=2, num_workers=2)))
"""


def header_version():
    text = (ROOT / "include" / "lotus" / "version.hpp").read_text()
    return ".".join(re.search(rf"#define LOTUS_VERSION_{p} (\d+)", text).group(1)
                    for p in ("MAJOR", "MINOR", "PATCH"))


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "LOTUS_LOG_FILE", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(extra)
    return env


def run(args, cwd, env=None, timeout=1500):
    r = subprocess.run([str(a) for a in args], cwd=cwd, env=env or clean_env(),
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{args}: exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def check_import(python, cwd, expect_under):
    out = run([python, "-c", "import json, lotus, lotus.torch; "
               "print(json.dumps([lotus.__version__, lotus.__file__, lotus.tool_path()]))"], cwd)
    version, where, tool = json.loads(out.stdout.strip().splitlines()[-1])
    assert version == header_version()
    assert pathlib.Path(where).resolve().is_relative_to(pathlib.Path(expect_under).resolve()), where
    return tool


def traced_run_checked(python, tool, tmp):
    trace = tmp / "trace"
    run([python, "-c", TRACED_RUN, trace / "lotustrace_log"], tmp)
    names = sorted(p.name for p in trace.iterdir() if not p.name.startswith("."))
    assert any("_main_pid_" in n for n in names) and any("_worker_pid_" in n for n in names), names
    out = run([tool, "check", trace], tmp).stdout
    assert out.startswith("ok: "), out


@pytest.mark.skipif("LOTUS_BUILD_DIR" not in os.environ, reason="run from ctest")
def test_cmake_install_puts_the_package_where_python_finds_it(tmp_path):
    prefix = tmp_path / "prefix"
    run(["cmake", "--install", os.environ["LOTUS_BUILD_DIR"], "--prefix", prefix,
         "--component", "python"], tmp_path)
    site = prefix / os.environ["LOTUS_PYTHON_INSTALL_DIR"]
    files = sorted(p.name for p in (site / "lotus").iterdir())
    assert [f for f in files if f.endswith(".py")] == ["__init__.py", "_gcmark.py", "_tool.py",
                                                      "frame.py", "torch.py"]
    tuned = sorted(p.name for p in (site / "lotus" / "autotune").iterdir())
    assert tuned == ["__init__.py", "loader.py", "measure.py", "model.py", "tuner.py"], tuned
    loaders = sorted(p.name for p in (site / "lotus" / "loaders").iterdir())
    assert {"__init__.py", "_contract.py", "dataloader.py", "stateful.py"} <= set(loaders), loaders
    assert len([f for f in files if f.startswith("_lotus") and f.endswith(".so")]) == 1, files
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = clean_env(PYTHONPATH=str(site))
    out = run([sys.executable, "-c", "import json, lotus, lotus.torch; "
               "print(json.dumps([lotus.__version__, lotus.__file__]))"], elsewhere, env)
    version, where = json.loads(out.stdout)
    assert version == header_version()
    assert pathlib.Path(where).resolve().is_relative_to(site.resolve())
    # The installed package traces.
    run([sys.executable, "-c", "import lotus, sys; lotus.configure(log_file=sys.argv[1]); "
         "s = lotus.scope('Op'); s.__enter__(); s.__exit__(None, None, None); lotus.shutdown()",
         elsewhere / "t" / "x"], elsewhere, env)
    rows = [p for p in (elsewhere / "t").iterdir() if p.name.startswith("x_worker_pid_")]
    assert len(rows) == 1 and rows[0].read_text().startswith("SOp,")


def tree(root):
    """Every file and directory under `root` (relative paths; byte-code caches left out)."""
    return {str(p.relative_to(root)) for p in pathlib.Path(root).rglob("*")
            if "__pycache__" not in p.parts}


def cmake_consumer_checked(prefix, where):
    """A CMake project of one traced op, built against the package config pip installed under
    `prefix` (find_package with CMAKE_PREFIX_PATH), and run: its op recorded."""
    where.mkdir()
    (where / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.21)\nproject(consumer CXX)\n"
        "find_package(lotus CONFIG REQUIRED)\nmessage(STATUS \"lotus from ${lotus_DIR}\")\n"
        "add_executable(consumer main.cpp)\n"
        "target_link_libraries(consumer PRIVATE lotus::lotus)\n")
    (where / "main.cpp").write_text(
        "#include <lotus/lotus.hpp>\nint main() { LOTUS_SCOPE(\"Normalize\"); }\n")
    out = run(["cmake", "-S", where, "-B", where / "b", f"-DCMAKE_PREFIX_PATH={prefix}",
               "-DCMAKE_BUILD_TYPE=Release"], where).stdout
    found = re.search(r"lotus from (\S+)", out).group(1)
    assert pathlib.Path(found).resolve() == (pathlib.Path(prefix) / "lib/lotus/cmake").resolve()
    run(["cmake", "--build", where / "b"], where)
    run([where / "b" / "consumer"], where, clean_env(LOTUS_LOG_FILE=str(where / "t" / "x")))
    (rows,) = (where / "t").glob("x_worker_pid_*")
    assert rows.read_text().startswith("SNormalize,")


def copy_checkout(dest):
    """The source tree as a user has it: no build trees, no git metadata needed."""
    ignore = shutil.ignore_patterns(".git", "build*", "demo_out", "__pycache__", "*.egg-info",
                                    "dist", "Testing", "*_out")
    shutil.copytree(ROOT, dest, ignore=ignore, symlinks=True)


@pytest.mark.skipif("LOTUS_PIP_TEST" not in os.environ, reason="run from ctest (python.pip)")
def test_pip_venv_wheel_and_uninstall(tmp_path):
    src = tmp_path / "src"
    copy_checkout(src)
    work = tmp_path / "work"  # every command but the builds runs away from the checkout
    work.mkdir()
    venv = tmp_path / "v1"
    run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv], work)
    before = tree(venv)
    run([venv / "bin" / "pip", "install", "--no-build-isolation", "--no-index", "-q", src], work)
    assert (venv / "lib" / "lotus" / "cmake" / "lotusConfig.cmake").is_file()
    assert not (venv / "share").exists()  # a venv has none: pip uninstall would leave it behind
    cmake_consumer_checked(venv, tmp_path / "consumer")
    tool = venv / "bin" / "lotus-tool"
    assert tool.exists()
    assert run([tool, "--version"], work).stdout.strip() == header_version()
    found = check_import(venv / "bin" / "python", work, venv)
    assert pathlib.Path(found).resolve().is_relative_to(venv.resolve())  # the bundled binary
    traced_run_checked(venv / "bin" / "python", tool, work)
    # lotus.mcp's explain reads the findings' rules from the copy of FINDINGS.md in the package.
    shipped = run([venv / "bin" / "python", "-c", "import lotus.mcp, pathlib; "
                   "print(pathlib.Path(lotus.mcp.__file__).with_name('FINDINGS.md'))"], work)
    findings = pathlib.Path(shipped.stdout.strip().splitlines()[-1])
    assert findings.resolve().is_relative_to(venv.resolve()), findings
    assert findings.read_text() == (ROOT / "tools" / "docs" / "FINDINGS.md").read_text()
    if pathlib.Path("/usr/local/cuda/include/nvtx3/nvToolsExt.h").is_file():
        # NVTX found at build time: the extension pushes ranges, liblotus_nvtx.so is shipped.
        out = run([venv / "bin" / "python", "-c", "import json, lotus; "
                   "print(json.dumps([lotus.nvtx_compiled(), lotus.nvtx_injection_path()]))"], work)
        compiled, injection = json.loads(out.stdout.strip().splitlines()[-1])
        assert compiled and injection, out.stdout
        assert pathlib.Path(injection).resolve().is_relative_to(venv.resolve()), injection
    run([venv / "bin" / "pip", "uninstall", "-y", "-q", "lotus-trace"], work)
    assert not tool.exists()
    gone = subprocess.run([venv / "bin" / "python", "-c", "import lotus"], cwd=work,
                          env=clean_env(), capture_output=True, text=True)
    assert gone.returncode != 0 and "No module named 'lotus'" in gone.stderr
    after = tree(venv)  # nothing left behind, no emptied directory either
    assert after == before, (sorted(after - before), sorted(before - after))
    # A wheel, installed into a second venv.
    dist = tmp_path / "dist"
    run(["/usr/bin/python3", "-m", "build", "--wheel", "--no-isolation", "--outdir", dist, src], src)
    wheels = sorted(dist.glob("lotus_trace-*.whl"))
    assert len(wheels) == 1 and wheels[0].name.startswith(f"lotus_trace-{header_version()}-")
    v2 = tmp_path / "v2"
    run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", v2], work)
    run([v2 / "bin" / "pip", "install", "--no-index", "-q", wheels[0]], work)
    assert run([v2 / "bin" / "lotus-tool", "--version"], work).stdout.strip() == header_version()
    check_import(v2 / "bin" / "python", work, v2)


@pytest.mark.skipif("LOTUS_STACK_VENV" not in os.environ,
                    reason="run by test-all.sh's pip-* variants (a venv of pip's torch)")
def test_pip_install_into_a_venv_with_pips_torch(tmp_path):
    """The README's pip line in a venv that holds pip's torch and no Debian torch: pip builds lotus
    with build isolation (setuptools, wheel, pybind11 from PyPI, at the pins of
    tools/scripts/pip-stacks.txt) and bundles lotus-tool into the venv's bin/, `python -m
    lotus.torch --check` says every family records, a traced DataLoader run passes the bundled
    lotus-tool's check, and `pip uninstall lotus-trace` removes the module and the tool. (python.pip,
    on Debian's Python, also builds a wheel into a second venv.)"""
    venv = pathlib.Path(os.environ["LOTUS_STACK_VENV"])
    python = venv / "bin" / "python"
    src = tmp_path / "src"
    copy_checkout(src)
    work = tmp_path / "work"
    work.mkdir()
    pins = subprocess.run(["bash", ROOT / "tools" / "scripts" / "pip-stack.sh", "--list", "build"],
                          capture_output=True, text=True, check=True).stdout
    constraints = tmp_path / "constraints.txt"
    constraints.write_text(pins)
    no_debian = run([python, "-c", "import torch, sys; print(torch.__file__)"], work).stdout
    assert pathlib.Path(no_debian.strip()).resolve().is_relative_to(venv.resolve()), no_debian
    # Built at -O0 (setup.py's switches): what is checked is the install, not the code's speed
    # (the wheel variant builds with the release's flags).
    env = clean_env(PIP_CONSTRAINT=str(constraints), PIP_DISABLE_PIP_VERSION_CHECK="1",
                    LOTUS_PYTHON_OPTIMIZE="-O0", LOTUS_TOOL_OPTIMIZE="-O0")
    tool = venv / "bin" / "lotus-tool"
    uninstalled = False
    try:
        run([venv / "bin" / "pip", "install", "-q", src], work, env)
        assert run([tool, "--version"], work).stdout.strip() == header_version()
        out = run([python, "-c", "import json, lotus; print(json.dumps([lotus.__version__, "
                   "lotus.__file__]))"], work).stdout
        version, where = json.loads(out)
        assert version == header_version()
        assert pathlib.Path(where).resolve().is_relative_to(venv.resolve()), where
        check = subprocess.run([python, "-m", "lotus.torch", "--check"], cwd=work, env=clean_env(),
                               capture_output=True, text=True, timeout=900)
        assert check.returncode == 0, check.stdout + check.stderr
        assert "  DataLoader: ok" in check.stdout and "does not support" not in check.stdout
        traced_run_checked(python, tool, work)
        run([venv / "bin" / "pip", "uninstall", "-y", "-q", "lotus-trace"], work)
        uninstalled = True
        assert not tool.exists()
        gone = subprocess.run([python, "-c", "import lotus"], cwd=work, env=clean_env(),
                              capture_output=True, text=True)
        assert gone.returncode != 0 and "No module named 'lotus'" in gone.stderr
    finally:
        if not uninstalled:
            run([venv / "bin" / "pip", "uninstall", "-y", "-q", "lotus-trace"], work)
