#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# lotus — tests of tools/scripts/readme_commands.py on tests/docs/fixture.md (extraction, running, failures),
# and of tools/docs/FORMAT.md's worked example against tests/core/test_format.cpp and the golden trace.
import fnmatch
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "tools", "scripts", "readme_commands.py")
sys.path.insert(0, os.path.join(ROOT, "tools", "scripts"))
import readme_commands  # noqa: E402


def run_script(*args, timeout=60):
    p = subprocess.run([sys.executable, SCRIPT, *args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout, check=False)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


class Extractor(unittest.TestCase):
    def test_fixture_blocks_exactly(self):
        with open(os.path.join(HERE, "fixture.md"), encoding="utf-8") as f:
            blocks = readme_commands.extract(f.read(), "fixture.md")
        self.assertEqual(blocks, [
            (11, 'echo first > shared.txt\necho "block one ran"\n'),
            (23, "# a later block sees what an earlier one wrote (one scratch directory)\n"
                 "cat shared.txt\nprintf 'two\\n' | grep -q two && echo \"block two ran\"\n"),
        ])

    def test_no_marker_no_block(self):
        self.assertEqual(readme_commands.extract("```sh\nls\n```\n"), [])

    def test_bad_markers(self):
        cases = {
            "text\n<!-- readme-test -->\nnot a fence\n": "x.md:2: marker not directly followed",
            "<!-- readme-test -->\n\n```sh\nls\n```\n": "x.md:1: marker not directly followed",
            "<!-- readme-test -->\n```cpp\nint x;\n```\n": "x.md:2: a marked block must be sh or bash, not 'cpp'",
            "<!-- readme-test -->\n```\nls\n```\n": "x.md:2: a marked block must be sh or bash, not '(none)'",
            "a\n<!-- readme-test -->\n```sh\nls\n": "x.md:3: fenced block never closed",
            "<!-- readme-test -->": "x.md:1: marker at the end of the file",
            "```sh\nls\n": "x.md: a fenced block is never closed",
        }
        for text, message in cases.items():
            with self.subTest(text=text):
                with self.assertRaises(readme_commands.ExtractError) as e:
                    readme_commands.extract(text, "x.md")
                self.assertTrue(str(e.exception).startswith(message), str(e.exception))

    def test_list_and_malformed_exit_codes(self):
        rc, out, _ = run_script("--list", os.path.join(HERE, "fixture.md"))
        self.assertEqual(rc, 0)
        self.assertEqual(out.count("--- fixture.md:"), 2)
        with tempfile.TemporaryDirectory() as d:
            bad = os.path.join(d, "bad.md")
            write(bad, "<!-- readme-test -->\n```python\nprint(1)\n```\n")
            rc, _, err = run_script(bad)
            self.assertEqual(rc, 2)
            self.assertIn("bad.md:2: a marked block must be sh or bash", err)
        rc, _, err = run_script(os.path.join(HERE, "missing.md"))
        self.assertEqual(rc, 2)
        self.assertIn("missing.md", err)


class Runner(unittest.TestCase):
    def test_fixture_runs_in_order_in_one_scratch_dir(self):
        rc, out, err = run_script(os.path.join(HERE, "fixture.md"))
        self.assertEqual(rc, 0, err)
        self.assertEqual([l for l in out.splitlines() if not l.startswith("---")],
                         ["block one ran", "first", "block two ran",
                          "fixture.md: 2 marked block(s) passed"])

    def test_first_failure_stops_the_run_and_names_its_line(self):
        with tempfile.TemporaryDirectory() as d:
            md = os.path.join(d, "r.md")
            write(md, "<!-- readme-test -->\n```sh\necho one\n```\n\n"
                      "<!-- readme-test -->\n```sh\necho two\nfalse\necho not-reached-in-block\n```\n\n"
                      "<!-- readme-test -->\n```sh\necho three\n```\n")
            rc, out, err = run_script(md)
            self.assertEqual(rc, 1)
            self.assertIn("r.md:8: block 2 failed (exit 1):", err)
            self.assertIn("    false\n", err)
            self.assertIn("two", out)
            self.assertNotIn("not-reached-in-block", out)
            self.assertNotIn("three", out)

    def test_pipefail_and_timeout(self):
        with tempfile.TemporaryDirectory() as d:
            md = os.path.join(d, "p.md")
            write(md, "<!-- readme-test -->\n```sh\nfalse | cat\n```\n")
            self.assertEqual(run_script(md)[0], 1)
            write(md, "<!-- readme-test -->\n```sh\nsleep 30\n```\n")
            rc, _, err = run_script("--timeout", "0.5", md)
            self.assertEqual(rc, 1)
            self.assertIn("p.md:3: block 1 failed (timeout after 0.5 s)", err)

    def test_no_marked_block_is_a_failure(self):
        with tempfile.TemporaryDirectory() as d:
            md = os.path.join(d, "n.md")
            write(md, "```sh\nls\n```\n")
            rc, _, err = run_script(md)
            self.assertEqual(rc, 1)
            self.assertIn("0 marked block(s), expected at least 1", err)

    def test_build_dir_tool_on_path_and_source_tree_visible(self):
        with tempfile.TemporaryDirectory() as d:
            src, build = os.path.join(d, "src"), os.path.join(d, "bld")
            os.makedirs(os.path.join(src, "examples"))
            write(os.path.join(src, "examples", "data.txt"), "from the source tree\n")
            tool_dir = os.path.join(build, "tools", "lotus-tool")
            os.makedirs(tool_dir)
            tool = os.path.join(tool_dir, "lotus-tool")
            write(tool, "#!/bin/sh\necho \"fake lotus-tool $*\"\n")
            os.chmod(tool, stat.S_IRWXU)
            md = os.path.join(src, "README.md")
            write(md, "<!-- readme-test -->\n```sh\ncat examples/data.txt\nlotus-tool stats x/\n"
                      "test -x build/tools/lotus-tool/lotus-tool\ntest -z \"${LOTUS_LOG_FILE:-}\"\n"
                      "touch made-here\n```\n")
            env_rc = subprocess.run([sys.executable, SCRIPT, "--build", build, md],
                                    env=dict(os.environ, LOTUS_LOG_FILE="/nonexistent/x"),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
            out = env_rc.stdout.decode()
            self.assertEqual(env_rc.returncode, 0, env_rc.stderr.decode())
            self.assertIn("from the source tree", out)
            self.assertIn("fake lotus-tool stats x/", out)
            self.assertFalse(os.path.exists(os.path.join(src, "made-here")))  # scratch, not source
            rc, _, err = run_script("--build", os.path.join(d, "none"), md)
            self.assertEqual(rc, 2)
            self.assertIn("build directory not found", err)


def cpp_string(source, variable):
    """The value of `const std::string <variable> = "..." "...";` in a C++ source."""
    m = re.search(r"const std::string " + variable + r" =(.*?);", source, re.S)
    return "".join(s.encode().decode("unicode_escape") for s in re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1)))


class FormatExample(unittest.TestCase):
    def test_format_doc_example_equals_test_and_golden(self):
        with open(os.path.join(ROOT, "tools", "docs", "FORMAT.md"), encoding="utf-8") as f:
            doc = f.read()
        examples = dict(re.findall(r"<!-- format-example: (\S+) -->\n```\n(.*?)```\n", doc, re.S))
        self.assertEqual(sorted(examples), ["lotustrace_log_main_pid_48190",
                                            "lotustrace_log_worker_pid_48213"])
        with open(os.path.join(ROOT, "tests", "core", "test_format.cpp"), encoding="utf-8") as f:
            test = f.read()
        from_test = {"lotustrace_log_worker_pid_48213": cpp_string(test, "expected_worker"),
                     "lotustrace_log_main_pid_48190": cpp_string(test, "expected_main")}
        for name, text in examples.items():
            with self.subTest(file=name):
                with open(os.path.join(ROOT, "tests", "tool", "data", "golden", name),
                          encoding="utf-8") as f:
                    golden = f.read()
                self.assertEqual(text, golden)
                self.assertEqual(text, from_test[name])
                self.assertGreater(text.count("\n"), 10)


class BenchQuiet(unittest.TestCase):
    """bench/quiet.sh: the load check every bench script runs first."""
    QUIET = os.path.join(ROOT, "bench", "quiet.sh")

    def quiet(self, load, *args, **env):
        with tempfile.TemporaryDirectory() as d:
            f = os.path.join(d, "loadavg")
            write(f, f"{load} 0.50 0.25 1/100 4242\n")
            p = subprocess.run([self.QUIET, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=dict(os.environ, LOTUS_BENCH_LOADAVG_FILE=f, **env),
                               timeout=30, check=False)
            return p.returncode, p.stdout.decode(), p.stderr.decode()

    def test_quiet_machine_runs_and_records_the_load(self):
        rc, out, err = self.quiet("0.40", "sh", "-c", "echo measured; exit 5")
        self.assertEqual(rc, 5, err)
        lines = out.splitlines()
        self.assertTrue(lines[0].startswith("bench: load average 0.40 0.50 0.25 (1/5/15 min) on "))
        self.assertEqual(lines[1:], ["measured", "bench: load average at the end: 0.40 0.50 0.25"])

    def test_busy_machine_is_refused_unless_allowed(self):
        rc, out, err = self.quiet("6.50", "echo", "measured")
        self.assertEqual(rc, 3)
        self.assertNotIn("measured", out)
        self.assertIn("bench: load average 6.50 is above 1", err)
        rc, out, err = self.quiet("6.50", "echo", "measured", LOTUS_BENCH_ALLOW_LOAD="1")
        self.assertEqual(rc, 0)
        self.assertIn("measured", out)
        self.assertIn("warning: load average 6.50 is above 1", err)
        self.assertEqual(self.quiet("6.50", "--check", LOTUS_BENCH_MAX_LOAD="8")[0], 0)
        self.assertEqual(self.quiet("1.00", "--check")[0], 0)
        self.assertEqual(self.quiet("1.01", "--check")[0], 3)

    def test_bad_usage(self):
        self.assertEqual(self.quiet("0.1")[0], 2)
        rc, _, err = self.quiet("0.1", "--check", LOTUS_BENCH_MAX_LOAD="one")
        self.assertEqual(rc, 2)
        self.assertIn("LOTUS_BENCH_MAX_LOAD must be a number, not 'one'", err)


def github_slug(heading):
    """The anchor GitHub gives a Markdown heading."""
    text = re.sub(r"<[^>]+>", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def tracked(pattern):
    out = subprocess.run(["git", "-C", ROOT, "ls-files", pattern], stdout=subprocess.PIPE,
                         check=True).stdout.decode().split()
    return [os.path.join(ROOT, f) for f in out]


class Links(unittest.TestCase):
    """Every relative link of every Markdown file leads to a file and, with #anchor, a heading."""

    def anchors(self, path):
        # Headings only: a raw-HTML anchor (<a id="x">) is dropped by viewers that strip HTML,
        # so a link to one is dead there (README's examples/README.md#libtorch was).
        with open(path, encoding="utf-8") as f:
            text = re.sub(r"```.*?```", "", f.read(), flags=re.S)
        return {github_slug(h) for h in re.findall(r"^#{1,6} (.*)$", text, re.M)}

    def test_raw_html_anchor_is_no_target(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "x.md")
            write(path, '<a id="libtorch"></a>\n## `lotus/torch.hpp` and `x` \u2014 libtorch\n')
            self.assertNotIn("libtorch", self.anchors(path))
            self.assertIn("lotustorchhpp-and-x--libtorch", self.anchors(path))

    def test_relative_links_resolve(self):
        docs = tracked("*.md")
        self.assertIn(os.path.join(ROOT, "README.md"), docs)
        bad = []
        for doc in docs:
            with open(doc, encoding="utf-8") as f:
                text = re.sub(r"```.*?```", "", f.read(), flags=re.S)
            for target in re.findall(r"\]\(([^)\s]+)\)", text):
                if re.match(r"[a-z]+:", target):
                    continue  # https:, mailto:
                path, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
                rel = os.path.relpath(doc, ROOT)
                if not os.path.exists(dest):
                    bad.append(f"{rel}: {target}: no such file")
                elif anchor and dest.endswith(".md") and anchor not in self.anchors(dest):
                    bad.append(f"{rel}: {target}: no such heading")
        self.assertEqual(bad, [])

    def test_slug(self):
        self.assertEqual(github_slug("Compile cost (`bench/runtime/compile_cost.sh`)"),
                         "compile-cost-benchruntimecompile_costsh")
        self.assertEqual(github_slug("4. Batch records (main files) and their rules"),
                         "4-batch-records-main-files-and-their-rules")

    def test_no_pointer_outside_the_repository(self):
        needles = ["../" + "shared", "/work/" + "shared", "lotus-" + "format.md"]
        hits = []
        for f in tracked("*"):
            if not os.path.isfile(f):
                continue
            with open(f, "rb") as fh:
                data = fh.read()
            hits += [f"{os.path.relpath(f, ROOT)}: {n}" for n in needles if n.encode() in data]
        self.assertEqual(hits, [])

    def test_no_issue_numbers_in_user_docs(self):
        # Tracker numbers mean nothing to a user (history belongs to CHANGELOG.md): README.md,
        # tools/docs/, tools/*/README.md and examples/**/*.md name none.
        docs = tracked("README.md") + tracked("tools/docs/*.md") + tracked("tools/README.md")
        docs += tracked("tools/*/README.md") + tracked("examples/*.md") + tracked("examples/**/*.md")
        self.assertIn(os.path.join(ROOT, "tools", "docs", "WHATIF.md"), docs)
        hits = []
        for doc in sorted(set(docs)):
            with open(doc, encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    if re.search(r"\bissues? #?\d", line, re.I):
                        hits.append(f"{os.path.relpath(doc, ROOT)}:{n}: {line.strip()[:80]}")
        self.assertEqual(hits, [])

    # Files whose owners are still rewording their issue numbers (drop a line when it is done).
    ISSUE_NUMBERS_PENDING = set()

    def test_no_issue_numbers_in_product_code(self):
        # What users build and read (the headers, the tool, the Python package, the injection
        # libraries, the scripts, the examples) names no tracker number: say what the code does
        # and why; the history is the commit log's.
        files = []
        for top in ("include", "single_include", "tools", "examples"):
            files += tracked(top)
        files += tracked("CMakeLists.txt") + tracked("setup.py") + tracked("pyproject.toml")
        pattern = re.compile(r"\bissues? ?#?\d|(^|[\s(,;])#\d{2,3}\b(?![-\w;])", re.I)
        hits = []
        for path in files:
            rel = os.path.relpath(path, ROOT)
            if rel in self.ISSUE_NUMBERS_PENDING or rel.endswith((".css", ".min.js")):
                continue
            try:
                with open(path, encoding="utf-8") as f:
                    lines = f.readlines()
            except (UnicodeDecodeError, IsADirectoryError):
                continue
            hits += [f"{rel}:{n}: {line.strip()[:80]}" for n, line in enumerate(lines, 1)
                     if pattern.search(line)]
        self.assertEqual(hits, [])
        self.assertTrue(pattern.search("a fix (issue #71: 3 runs)") and pattern.search("# #53"))
        self.assertFalse(pattern.search("FORMAT.md#10-summaries, color: #222; &#39;"))

    def test_no_words_of_removed_designs(self):
        # Names of what is gone (the per-target compiled runtime and its options, the header-only
        # runtime's optimizer region, lotus-tool's "core" library and its ten command files) live
        # on only in CHANGELOG.md's history.
        gone = ["LOTUS_COMPILED_LIB", "lotus::header_only", "lotus_compiled", "lotus/src.hpp",
                "LOTUS_RUNTIME_FULL_OPT", "LOTUS_TOOL_CORE_", "the ten files"]
        hits = []
        for path in tracked("*"):
            rel = os.path.relpath(path, ROOT)
            if rel == "CHANGELOG.md" or rel == "tests/docs/test_docs.py" or not os.path.isfile(path):
                continue
            with open(path, "rb") as f:
                data = f.read()
            hits += [f"{rel}: {w}" for w in gone if w.encode() in data]
        self.assertEqual(hits, [])

    def test_changelog_unreleased_is_one_list_per_kind(self):
        # The Unreleased section a user reads: Added, Changed, Removed, Fixed (Keep a Changelog's
        # kinds), each at most once; tracker numbers are for the commit log, not for it.
        with open(os.path.join(ROOT, "CHANGELOG.md"), encoding="utf-8") as f:
            text = f.read()
        unreleased = text.split("\n## Unreleased\n", 1)[1].split("\n## ", 1)[0]
        kinds = re.findall(r"^### (.*)$", unreleased, re.M)
        self.assertEqual(len(kinds), len(set(kinds)), kinds)
        allowed = ["Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"]
        self.assertEqual([k for k in kinds if k not in allowed], [], kinds)
        self.assertEqual(kinds, sorted(kinds, key=allowed.index), "kinds out of order")
        hits = [line for line in unreleased.splitlines()
                if re.search(r"\bissues? #?\d|(^|[\s(])#\d{2,3}\b", line, re.I)]
        self.assertEqual(hits, [])

    def test_readme_length(self):
        with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
            lines = f.read().count("\n")
        self.assertLessEqual(lines, int(os.environ.get("LOTUS_README_MAX_LINES", "300")))


class Layout(unittest.TestCase):
    """tools/docs/architecture.md's room table is the tree: every room it names exists with a
    README, every folder of tools/ is a room it names, and nothing but README.md and deps.txt lies
    loose beside the rooms. The top level holds only what the project's design fixes."""

    def rooms(self):
        with open(os.path.join(ROOT, "tools", "docs", "architecture.md"), encoding="utf-8") as f:
            text = f.read()
        table = text.split("<!-- rooms:", 1)[1].split("\n\n", 1)[0]
        return re.findall(r"^\| `tools/([^`/]+)/` \|", table, re.M)

    def test_rooms_match_the_tree(self):
        rooms = self.rooms()
        self.assertGreaterEqual(len(rooms), 6, rooms)
        tools = os.path.join(ROOT, "tools")
        tracked_tools = {os.path.relpath(f, tools).split(os.sep)[0]: f
                         for f in tracked("tools/*")}
        dirs = sorted(n for n in tracked_tools if os.path.isdir(os.path.join(tools, n)))
        self.assertEqual(sorted(rooms), dirs)
        loose = sorted(n for n in tracked_tools if not os.path.isdir(os.path.join(tools, n)))
        self.assertEqual(loose, ["README.md", "deps.txt"])
        for room in rooms:
            self.assertTrue(os.path.isfile(os.path.join(tools, room, "README.md")), room)

    def test_public_headers_are_the_api(self):
        """architecture.md names every public header, and no header but config.hpp acts on
        LOTUS_DISABLE (detail/hooks.hpp acts on what config.hpp derives from it)."""
        with open(os.path.join(ROOT, "tools", "docs", "architecture.md"), encoding="utf-8") as f:
            text = f.read()
        api = text.split("## API and machinery", 1)[1].split("\n## ", 1)[0]
        include = os.path.join(ROOT, "include", "lotus")
        public = sorted(n for n in os.listdir(include) if n.endswith(".hpp"))
        self.assertEqual(sorted(re.findall(r"`([a-z_]+\.hpp)`", api.split("everything else")[0])),
                         public)
        switches = []
        for d in (include, *(os.path.join(include, s) for s in ("detail", "runtime", "collectors"))):
            for name in sorted(os.listdir(d)):
                if not name.endswith(".hpp"):
                    continue
                with open(os.path.join(d, name), encoding="utf-8") as f:
                    for n, line in enumerate(f, 1):
                        if re.match(r"\s*#\s*(if|ifdef|ifndef|elif)\b.*LOTUS_DISABLE", line):
                            switches.append(f"{os.path.relpath(os.path.join(d, name), ROOT)}:{n}")
        self.assertEqual(len(switches), 1, switches)
        self.assertTrue(switches[0].startswith("include/lotus/config.hpp:"), switches)

    def test_top_level_is_fixed(self):
        allowed = {"include", "single_include", "examples", "tests", "bench", "tools",
                   "CMakeLists.txt", "README.md", "LICENSE", "CHANGELOG.md", "setup.py",
                   "pyproject.toml", ".gitignore", ".ci", ".clang-format", ".gitattributes",
                   "MANIFEST.in"}  # the sdist's file list (packaging's root files)
        top = {os.path.relpath(f, ROOT).split(os.sep)[0] for f in tracked("*")}
        self.assertEqual(sorted(top - allowed), [])


def option_rows():
    """The rows of include/lotus/runtime/option_table.hpp: (field or None, env, kind, default as the
    docs spell it). Parsed from the header, so this check needs no build."""
    with open(os.path.join(ROOT, "include", "lotus", "runtime", "option_table.hpp"),
              encoding="utf-8") as f:
        header = f.read()
    with open(os.path.join(ROOT, "include", "lotus", "config.hpp"), encoding="utf-8") as f:
        macros = dict(re.findall(r"#\s*define (LOTUS_DEFAULT_\w+) (\d+)", f.read()))
    arrays = {name: re.findall(r'"([^"]*)"', body) for name, body in re.findall(
        r"inline constexpr const char\* (\w+)\[\] = \{(.*?)\};", header, re.S)}
    table = header[header.index("option_table[] = {"):header.index("// clang-format on")]
    rows = []
    for m in re.finditer(r'\{(nullptr|"\w+"), "(LOTUS_\w+)", option_kind::(\w+), ([^,]+), ([^,]+),'
                         r'\s*([^,]+), (\w+), (nullptr|"[^"]*"),', table):
        field, env, kind, default, choices, text = (m.group(i) for i in (1, 2, 3, 6, 7, 8))
        if text != "nullptr":
            shown = text[1:-1].encode("latin-1").decode("unicode_escape").encode(
                "latin-1").decode("utf-8")
        elif kind == "choice":
            shown = arrays[choices][int(default)]
        else:
            shown = macros.get(default.strip(), default.strip())
        rows.append((None if field == "nullptr" else field[1:-1], env, kind, shown))
    return rows


class Options(unittest.TestCase):
    """Every option of the option table appears in the docs' tables with its variable and default:
    the run-time options in README.md and tools/docs/RUNTIME.md (with their options field), the
    collector's and mapping probe's in examples/probes/README.md (README.md names them by prefix)."""

    def table_lines(self, rel):
        """The rows of the tables whose header starts `| variable` (not the compile-time ones)."""
        with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
            lines = f.read().splitlines()
        rows, inside = [], False
        for line in lines:
            if not line.startswith("|"):
                inside = False
            elif line.startswith("| variable"):
                inside = True
            elif inside and line.startswith("| `"):
                rows.append(line)
        return rows

    def check(self, rel, rows, with_field):
        lines = self.table_lines(rel)
        for field, env, _, default in rows:
            with self.subTest(doc=rel, env=env):
                hits = [ln for ln in lines if f"`{env}`" in ln.split(" | ")[0]]
                self.assertEqual(len(hits), 1, f"{rel}: one table row names `{env}`")
                cells = hits[0].split(" | ")
                if with_field:
                    self.assertIn(f"`{env}` / `{field}`", cells[0])
                self.assertIn(default, cells[1], f"{rel}: the default of {env}")

    def test_table_parsed(self):
        rows = option_rows()
        self.assertEqual(len(rows), 26)
        self.assertIn(("flush_interval", "LOTUS_FLUSH_INTERVAL_MS", "uint", "100"), rows)
        self.assertIn((None, "LOTUS_COLLECTOR", "choice", "auto"), rows)
        self.assertIn(("resources", "LOTUS_RESOURCES", "flag", "1"), rows)
        self.assertIn(("memory_readings", "LOTUS_MEMORY_READINGS", "choice", "budget"), rows)
        self.assertIn(("live", "LOTUS_LIVE", "flag", "1"), rows)

    def test_runtime_options_in_readme_and_runtime_md(self):
        rows = [r for r in option_rows() if r[0] is not None]
        self.check("README.md", rows, True)
        self.check(os.path.join("tools", "docs", "RUNTIME.md"), rows, True)

    def test_collector_options_in_probes_readme(self):
        rows = [r for r in option_rows() if r[0] is None]
        self.check(os.path.join("examples", "probes", "README.md"), rows, False)
        readme = "\n".join(self.table_lines("README.md"))
        for r in rows:
            prefix = "LOTUS_COLLECTOR" if r[1] == "LOTUS_COLLECTOR" else r[1][:r[1].index("_", 6)]
            self.assertTrue(f"`{r[1]}`" in readme or f"`{prefix}_*`" in readme, r[1])


NUMBERS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine",
           10: "ten", 11: "eleven", 12: "twelve"}


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def tool_commands_in_source():
    """lotus-tool's commands, as cli/*.cpp register them (add_subcommand("name", ...))."""
    cli = os.path.join(ROOT, "tools", "lotus-tool", "cli")
    names = []
    for name in sorted(os.listdir(cli)):
        if name.endswith(".cpp"):
            with open(os.path.join(cli, name), encoding="utf-8") as f:
                names += re.findall(r'add_subcommand\(\s*"([a-z-]+)"', f.read())
    return names


def tool_libraries():
    """The folders of lotus-tool's libraries, as tools/lotus-tool/CMakeLists.txt defines them."""
    return re.findall(r"^lotus_tool_library\(lotus_tool_(\w+)", read("tools/lotus-tool/CMakeLists.txt"),
                      re.M)


def injection_libraries():
    """lib<name>.so of every shared library tools/inject/*/CMakeLists.txt builds."""
    inject = os.path.join(ROOT, "tools", "inject")
    found = []
    for d in sorted(os.listdir(inject)):
        cm = os.path.join(inject, d, "CMakeLists.txt")
        if os.path.isfile(cm):
            with open(cm, encoding="utf-8") as f:
                found += [f"lib{n}.so" for n in re.findall(r"add_library\((\w+) SHARED", f.read())]
    return found


def ctest_labels():
    """Every ctest label of tests/*/CMakeLists.txt (literal, or through a _<x>_labels variable)."""
    labels = set()
    for dirpath, _, files in os.walk(os.path.join(ROOT, "tests")):
        if "CMakeLists.txt" not in files:
            continue
        with open(os.path.join(dirpath, "CMakeLists.txt"), encoding="utf-8") as f:
            text = f.read()
        for group in re.findall(r'LABELS\s+"?([a-z][a-z;]*)"?', text):
            labels.update(group.split(";"))
        labels.update(re.findall(r"(?:set\(|list\(APPEND )_\w+_labels (\w+)\)", text))
    return labels


class Maps(unittest.TestCase):
    """The docs' maps of the code agree with it: lotus-tool's commands (README.md against cli/*.cpp
    and, given LOTUS_TOOL, against `lotus-tool --help`), the tool's libraries (their number and
    names in architecture.md, the tool's README and CMakeLists.txt), the injection libraries, the
    reference documents of tools/docs/ and the ctest labels of the README's test recipe."""

    def test_readme_commands_are_the_tools(self):
        commands = tool_commands_in_source()
        self.assertGreaterEqual(len(commands), 10, commands)
        self.assertEqual(len(commands), len(set(commands)), commands)
        readme = read("README.md")
        bullet = re.search(r"^- \*\*lotus-tool\*\* — ([^:]*):", readme, re.M)
        self.assertIsNotNone(bullet, "README.md: the '- **lotus-tool** — `check`, ...:' line")
        self.assertEqual(sorted(re.findall(r"`([a-z-]+)`", bullet.group(1))), sorted(commands),
                         "README.md's command list against tools/lotus-tool/cli/*.cpp")
        table = readme.split("\n## lotus-tool\n", 1)[1].split("\n## ", 1)[0]
        rows = [ln.split(" | ")[0] for ln in table.splitlines() if ln.startswith("| `")]
        in_table = [c.split()[0] for row in rows for c in re.findall(r"`([^`]+)`", row)]
        self.assertEqual(sorted(in_table), sorted(commands),
                         "README.md's lotus-tool table against tools/lotus-tool/cli/*.cpp")
        manual = read("tools/lotus-tool/README.md")
        headed = set(re.findall(r"^### (?:LotusMap: )?(.*)$", manual, re.M))
        words = {w for h in headed for w in re.findall(r"`?([a-z]+)`?", h)}
        self.assertEqual(sorted(c for c in commands if c not in words), [],
                         "tools/lotus-tool/README.md: a heading per command")

    def test_help_lists_the_same_commands(self):
        tool = os.environ.get("LOTUS_TOOL")
        if not tool:
            self.skipTest("LOTUS_TOOL (the built lotus-tool) not given")
        out = subprocess.run([tool, "--help"], stdout=subprocess.PIPE, check=True).stdout.decode()
        section = out.split("Subcommands:\n", 1)[1].split("\n\n", 1)[0]
        helped = re.findall(r"^  ([a-z-]+)\s", section, re.M)
        self.assertEqual(sorted(helped), sorted(tool_commands_in_source()))

    def test_tool_libraries(self):
        libs = tool_libraries()
        self.assertGreaterEqual(len(libs), 6, libs)
        word = NUMBERS[len(libs)]
        cmake = read("tools/lotus-tool/CMakeLists.txt")
        self.assertIn(f"The tool is {word} libraries", cmake)
        self.assertEqual(sorted(re.findall(r"^#   (\w+)/ ", cmake, re.M)), sorted(libs + ["cli"]))
        arch = read("tools/docs/architecture.md")
        row = [ln for ln in arch.splitlines() if ln.startswith("| `tools/lotus-tool/` |")]
        self.assertEqual(len(row), 1)
        self.assertIn(f"{word} libraries", row[0])
        self.assertEqual(sorted(re.findall(r"`([a-z]+)`", row[0].split("libraries", 1)[1].split(")")[0])),
                         sorted(libs))
        manual = read("tools/lotus-tool/README.md")
        layout = manual.split("### Source layout", 1)[1].split("\n### ", 1)[0]
        self.assertIn(f"{word.capitalize()} static libraries", layout)
        self.assertEqual(sorted(re.findall(r"^\| `(\w+)/` \| `lotus_tool_", layout, re.M)), sorted(libs))

    def test_injection_libraries(self):
        libs = injection_libraries()
        self.assertGreaterEqual(len(libs), 2, libs)
        for rel, key in (("tools/README.md", "| [`inject/`]"),
                         ("tools/docs/architecture.md", "| `tools/inject/` |")):
            row = [ln for ln in read(rel).splitlines() if ln.startswith(key)]
            self.assertEqual(len(row), 1, rel)
            self.assertEqual(sorted(set(re.findall(r"(lib\w+\.so)", row[0]))), sorted(libs), rel)

    def test_reference_documents(self):
        docs = sorted(n for n in os.listdir(os.path.join(ROOT, "tools", "docs"))
                      if n.endswith(".md") and n != "README.md")
        index = read("tools/docs/README.md")
        self.assertEqual(sorted(set(re.findall(r"\]\(([A-Za-z]+\.md)\)", index))), docs)
        for sentence in re.split(r"(?<=[.)]) ", index):
            self.assertLessEqual(index.count(sentence), 1, f"repeated in tools/docs/README.md: {sentence}")

    def test_test_areas(self):
        labels = ctest_labels()
        self.assertIn("core", labels)
        readme = read("README.md")
        m = re.search(r"`ctest -L AREA`[^:]*: ((?:`[a-z]+`[ ,]*(?:and )?)+)", readme)
        self.assertIsNotNone(m, "README.md: the list of `ctest -L AREA` areas")
        self.assertEqual(sorted(re.findall(r"`([a-z]+)`", m.group(1))), sorted(labels))
        areas = re.search(r"set\(LOTUS_TEST_AREAS ([a-z; ]+)\)", read("tests/CMakeLists.txt"))
        self.assertIsNotNone(areas, "tests/CMakeLists.txt: set(LOTUS_TEST_AREAS ...)")
        self.assertEqual(sorted(areas.group(1).replace(";", " ").split()), sorted(labels))


def first_run_table():
    """bench/README.md's first-run table (bench/first_run/first_run.sh's rows, after its
    "**Measured**" line): {label: (steps or None, wall s, CPU s)}."""
    text = read(os.path.join("bench", "README.md"))
    section = text[text.index("## Build and first-run times"):]
    section = section[section.index("**Measured**"):]
    rows = {}
    for line in section.splitlines():
        if rows and not line.startswith("|"):
            break
        m = re.match(r"\|\s*\**`([^`]+)`\**\s*\|\s*(\d+|—)\s*\|\s*\**([\d.]+) s\**\s*\|"
                     r"\s*([\d.]+) s\s*\|", line)
        if m:
            steps = None if m.group(2) == "—" else int(m.group(2))
            rows[m.group(1)] = (steps, float(m.group(3)), float(m.group(4)))
    return rows


def ninja_plan(cmake_args, targets=()):
    """The steps ninja plans for a fresh build of this tree with these CMake arguments."""
    with tempfile.TemporaryDirectory(prefix="lotus-plan-") as build:
        subprocess.run(["cmake", "-S", ROOT, "-B", build, "-G", "Ninja", *cmake_args], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
        out = subprocess.run(["ninja", "-C", build, "-n", *targets], check=True,
                             capture_output=True, text=True, timeout=60).stdout
    steps = re.findall(r"^\[\d+/(\d+)\]", out, re.M)
    return int(steps[-1]) if steps else 0


DEMO_CMAKE = ["-DCMAKE_BUILD_TYPE=Release", "-DLOTUS_BUILD_TESTS=OFF", "-DLOTUS_BUILD_BENCH=OFF",
              "-DLOTUS_BUILD_PYTHON=OFF", "-DLOTUS_WITH_TORCH=OFF", "-DLOTUS_TOOL_OPTIMIZE=-O1",
              "-DLOTUS_EXAMPLE_DIRS=common;image_pipeline"]
QUICK_CMAKE = ["-DCMAKE_BUILD_TYPE=Release", "-DLOTUS_BUILD_TESTS=OFF", "-DLOTUS_BUILD_BENCH=OFF"]


class Figures(unittest.TestCase):
    """Every build figure a new user reads (README, demo.sh, setup.py's line) is the quiet row of
    bench/README.md's first-run table (bench/first_run/first_run.sh), and its step count is what
    ninja plans for this tree today."""

    def setUp(self):
        self.table = first_run_table()
        for label in ("demo: build image_pipeline lotus-tool", "pip install --no-build-isolation .",
                      "quickstart: cmake --build build"):
            self.assertIn(label, self.table, "bench/README.md's first-run table lacks a row")

    def test_demo(self):
        steps, wall, cpu = self.table["demo: build image_pipeline lotus-tool"]
        readme = read("README.md")
        m = re.search(r"the build is (\d+) steps, a line `\[k/(\d+)\] Building …` each: (\d+) s on "
                      r"a quiet 2-core machine \((\d+) s of CPU", readme)
        self.assertIsNotNone(m, "README's demo build figure")
        self.assertEqual((int(m.group(1)), int(m.group(2))), (steps, steps))
        self.assertEqual((int(m.group(3)), int(m.group(4))), (round(wall), round(cpu)))
        demo = read(os.path.join("tools", "scripts", "demo.sh"))
        m = re.search(r"demo: (\d+) steps, a line each: about (\d+) s on 2 quiet cores", demo)
        self.assertIsNotNone(m, "demo.sh's build figure")
        self.assertEqual((int(m.group(1)), int(m.group(2))), (steps, round(wall)))
        unquoted = demo.replace('"', "")
        for arg in DEMO_CMAKE:  # the configuration counted is demo.sh's
            self.assertIn(arg, unquoted)

    def test_pip(self):
        steps, wall, cpu = self.table["pip install --no-build-isolation ."]
        readme = read("README.md")
        m = re.search(r"`lotus: \[[\d.]+ s\] \[\d+/(\d+)\] Building …`\): (\d+) s on a quiet 2-core "
                      r"machine \((\d+) s of CPU", readme)
        self.assertIsNotNone(m, "README's pip figure")
        self.assertEqual((int(m.group(1)), int(m.group(2)), int(m.group(3))),
                         (steps, round(wall), round(cpu)))
        m = re.search(r"about (\d+) s on 2 quiet cores", read("setup.py"))
        self.assertIsNotNone(m, "setup.py's build line")
        self.assertEqual(int(m.group(1)), round(wall))

    def test_quickstart(self):
        steps, wall, cpu = self.table["quickstart: cmake --build build"]
        m = re.search(r"`cmake --build build` is (\d+) steps: (\d+) s on a quiet 2-core machine "
                      r"\((\d+) s of CPU", read("README.md"))
        self.assertIsNotNone(m, "README's Quick start build figure")
        self.assertEqual((int(m.group(1)), int(m.group(2)), int(m.group(3))),
                         (steps, round(wall), round(cpu)))

    @unittest.skipUnless(shutil.which("cmake") and shutil.which("ninja"), "needs cmake and ninja")
    def test_steps_are_todays(self):
        demo = self.table["demo: build image_pipeline lotus-tool"][0]
        self.assertEqual(ninja_plan(DEMO_CMAKE, ["image_pipeline", "lotus-tool"]), demo,
                         "the demo's build steps changed: rerun bench/first_run/first_run.sh demo")
        with open("/etc/os-release", encoding="utf-8") as f:
            release = f.read()
        if "VERSION_CODENAME=bookworm" not in release:
            self.skipTest("the Quick start's steps depend on the packages found (libtorch, "
                          "pybind11): its figure is Debian 12's with tools/deps.txt installed")
        quick = self.table["quickstart: cmake --build build"][0]
        self.assertEqual(ninja_plan(QUICK_CMAKE), quick, "the Quick start's build steps changed: "
                         "rerun bench/first_run/first_run.sh quickstart")


class TestAllStop(unittest.TestCase):
    """tools/scripts/test-all.sh says what it will do before it does it, and SIGTERM to its pid
    (what a user's `kill` does) ends every process it started: nothing of the run is left."""

    def test_sigterm_to_its_pid_ends_every_child(self):
        if not os.path.isdir("/proc/self"):
            self.skipTest("no /proc: what is left running cannot be listed")
        deps = subprocess.run(["bash", os.path.join(ROOT, "tools", "scripts", "deps.sh"), "stack"],
                              capture_output=True, text=True, check=True).stdout.split()
        for pkg in deps:
            r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True,
                               text=True)
            if "install ok installed" not in r.stdout:
                self.skipTest(f"the stack variant's package {pkg} is not installed here")
        with tempfile.TemporaryDirectory(prefix="lotus-test-all-") as out:
            env = dict(os.environ, LOTUS_VARIANTS="stack", LOTUS_BUILD_ROOT=out)
            p = subprocess.Popen(["bash", os.path.join(ROOT, "tools", "scripts", "test-all.sh")],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 env=env, start_new_session=True)
            lines = []
            started = threading.Event()

            def read():
                for line in p.stdout:
                    lines.append(line)
                    if line.startswith("::: stack"):
                        started.set()
            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            try:
                self.assertTrue(started.wait(180), "".join(lines))
                time.sleep(3)  # the stage's configure and build are running
                p.send_signal(signal.SIGTERM)
                rc = p.wait(timeout=180)
            finally:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
            reader.join(10)
            text = "".join(lines)
            self.assertEqual(rc, 143, text)
            plan = text.index("test-all: variants: stack; build trees in " + out)
            self.assertLess(plan, text.index("::: stack"), text)
            self.assertIn("test-all: stopped; nothing left running", text)
            left = []
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
                    cwd = os.readlink(f"/proc/{pid}/cwd")
                except OSError:
                    continue
                if out in cmd or cwd.startswith(out):
                    left.append(f"{pid}: {cmd}")
            self.assertEqual(left, [], "processes of the stopped run")



class TestMatrix(unittest.TestCase):
    """tools/scripts/test-matrix.txt is what tools/scripts/test-all.sh runs where: every Python test
    file has a row, every row names a file that exists, and a row added to a copy of the table
    reaches the stacks it names (no edit of test-all.sh); a bad cell stops the script, naming it."""

    MATRIX = os.path.join(ROOT, "tools", "scripts", "test-matrix.txt")

    def rows(self, section, text=None):
        if text is None:
            with open(self.MATRIX, encoding="utf-8") as f:
                text = f.read()
        out, on = [], False
        for line in text.splitlines():
            if line.startswith("["):
                on = line.split()[0] == f"[{section}]"
                continue
            line = line.split("#", 1)[0].split()
            if on and line:
                out.append(line)
        return out

    def dry_run(self, variants, matrix=None):
        env = dict(os.environ, LOTUS_DRY_RUN="1", LOTUS_VARIANTS=variants)
        if matrix:
            env["LOTUS_TEST_MATRIX"] = matrix
        with tempfile.TemporaryDirectory(prefix="lotus-matrix-") as out:
            env["LOTUS_BUILD_ROOT"] = out
            p = subprocess.run(["bash", os.path.join(ROOT, "tools", "scripts", "test-all.sh")],
                               capture_output=True, text=True, env=env, timeout=60)
        plan = {}
        for line in p.stdout.splitlines():
            if line.startswith("dry-run: "):
                name, _, what = line[len("dry-run: "):].partition(": ")
                plan.setdefault(name, []).append(what)
        return p.returncode, plan, p.stdout + p.stderr

    def test_every_python_test_file_has_a_row_and_every_row_a_file(self):
        named = {r[1].split("::")[0] for r in self.rows("python") if r[1] != "-"}
        files = {os.path.basename(f) for f in tracked("tests/python/test_*.py")}
        # A row may name a glob (test_loader_*.py: every loader family's test).
        covered = {f for f in files if any(fnmatch.fnmatchcase(f, n) for n in named)}
        self.assertEqual(sorted(files - covered), [], "test files without a row in the matrix")
        self.assertEqual(sorted(n for n in named if "*" not in n and n not in files), [],
                         "rows naming no file of tests/python")
        for stack, node in self.rows("deselect"):
            self.assertIn(node.split("::")[0], files, node)

    def test_every_variant_is_one_the_script_runs(self):
        with open(os.path.join(ROOT, "tools", "scripts", "test-all.sh"), encoding="utf-8") as f:
            script = f.read()
        loop = script.split('for v in $variants; do\n  case "$v" in', 1)[1].split("\ndone", 1)[0]
        cases = set()
        for pattern in re.findall(r"^ {4}([a-z0-9|-]+)\)", loop, re.M):
            cases.update(pattern.split("|"))
        # The rest are built with CMake, as their [build] rows say (a line and CMake arguments each).
        built = {r[0] for r in self.rows("build")}
        self.assertEqual(cases & built, set())
        self.assertEqual({r[0] for r in self.rows("build") if r[1] == "what"},
                         {r[0] for r in self.rows("build") if r[1] == "cmake"})
        self.assertEqual(sorted(r[0] for r in self.rows("variants")), sorted(cases | built))

    def test_the_default_run_is_the_matrix(self):
        rc, plan, text = self.dry_run("gcc stack pip-middle pip-newest wheel clang")
        self.assertEqual(rc, 0, text)
        rows = self.rows("python")
        # gcc with both pip stacks in the run: its no and not-with-* rows are left out.
        gcc = {r[0] for r in rows if r[0] != "-" and r[2] != "yes"}
        self.assertIn("python.pip", gcc)
        self.assertEqual(set(re.findall(r"python\\\.[a-z_]+", plan["gcc"][0])),
                         {n.replace(".", "\\.") for n in gcc}, text)
        stack = {r[0] for r in rows if r[0] != "-" and r[3] == "no"}
        self.assertEqual(set(re.findall(r"python\\\.[a-z_]+", plan["stack"][0])),
                         {n.replace(".", "\\.") for n in stack}, text)
        # A glob row runs every file it matches: the loader families' tests on the newest stack
        # (its row says no for the middle one: none of them there).
        loaders = sorted(os.path.basename(f) for f in tracked("tests/python/test_loader_*.py"))
        self.assertTrue(loaders)
        for f in loaders:
            self.assertNotIn(f, plan["pip-middle"][0].split(), text)
            self.assertIn(f, plan["pip-newest"][0].split(), text)
        newest = plan["pip-newest"]
        self.assertIn("test_torch.py", newest[0].split())
        self.assertIn("test_memory.py", newest[1].split())
        self.assertNotIn("test_memory.py", newest[0].split())
        self.assertIn("-k 'not spawn and not forkserver'", plan["pip-middle"][0])
        self.assertIn("(11 deselected)", plan["wheel"][0])
        self.assertEqual(plan["clang"], ["ctest -L ^(core|config|collector|cmake|nvtx|itt|fuzz)$"])
        # Without pip-newest in the run, gcc runs the pip install and what pip's stacks would.
        rc, plan, text = self.dry_run("gcc")
        self.assertEqual((rc, plan["gcc"]), (0, ["ctest (every test its build has)"]), text)

    def test_a_new_row_runs_where_it_says_without_a_script_edit(self):
        with open(self.MATRIX, encoding="utf-8") as f:
            text = f.read()
        row = "python.family_x  test_family_x.py  yes  no  yes  alone  yes\n"
        text = text.replace("\n[deselect]", row + "\n[deselect]", 1)
        text += "pip-middle  test_family_x.py::test_slow\n"
        with tempfile.TemporaryDirectory() as d:
            matrix = os.path.join(d, "matrix.txt")
            write(matrix, text)
            rc, plan, out = self.dry_run("stack pip-middle pip-newest wheel", matrix)
            self.assertEqual(rc, 0, out)
            self.assertIn("python\\.family_x", plan["stack"][0])
            self.assertIn("test_family_x.py", plan["pip-middle"][0].split())
            self.assertIn("--deselect test_family_x.py::test_slow", plan["pip-middle"][0])
            self.assertNotIn("test_family_x.py", plan["pip-newest"][0].split())
            self.assertIn("test_family_x.py", plan["pip-newest"][1].split())
            self.assertIn("test_family_x.py", plan["wheel"][0].split())
            # A cell outside its column's words stops the run before anything starts.
            write(matrix, text.replace(row, row.replace("alone", "maybe")))
            rc, plan, out = self.dry_run("gcc", matrix)
            self.assertEqual(rc, 2, out)
            self.assertIn("bad row: [python] python.family_x", out)
            self.assertEqual(plan, {})


if __name__ == "__main__":
    unittest.main()
