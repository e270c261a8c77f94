// lotus — the option table: a bad value, from the environment or lotus::options, gets one message
// SPDX-License-Identifier: MIT
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

// option_put and option_text_problem, which only Python's configure compiles (option_table.hpp).
#define LOTUS_DETAIL_OPTION_PUT

#include "catch.hpp"
#include "lotus/lotus.hpp"
#include "lotus/options.hpp"
#include "spawn.hpp"

namespace {

namespace d = lotus::detail;

/// Runs f() with stderr (fd 2) captured; returns what was written.
template <class F>
std::string captured_stderr(F&& f) {
  lotus_test::temp_dir dir;
  const std::string path = dir / "err";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(fd >= 0);
  const int saved = ::dup(2);
  ::dup2(fd, 2);
  f();
  ::dup2(saved, 2);
  ::close(saved);
  ::close(fd);
  return lotus_test::read_file(path);
}

/// Every variable of the table unset, then `name`=`value` (when name is not null).
void set_only(const char* name, const char* value) {
  for (const auto& row : d::option_table) ::unsetenv(row.env);
  if (name != nullptr) ::setenv(name, value, 1);
}

struct merged {
  d::settings s;
  std::string err;
};

merged merge(const lotus::options& o, const char* name = nullptr, const char* value = nullptr) {
  merged m;
  m.err = captured_stderr([&] {
    set_only(name, value);
    d::env_settings env;
    env.read();
    d::merge_settings(o, env, m.s);
  });
  set_only(nullptr, nullptr);
  return m;
}

}  // namespace

TEST_CASE("option table: one row per option, ranges and defaults as documented",
          "[config][options]") {
  const auto& f = d::option_of(d::opt::flush_interval);
  CHECK(std::string(f.env) == "LOTUS_FLUSH_INTERVAL_MS");
  CHECK(f.min == 1);
  CHECK(f.max == 60000);
  CHECK(f.def == LOTUS_DEFAULT_FLUSH_INTERVAL_MS);
  CHECK(d::option_of(d::opt::ring_capacity).def == LOTUS_DEFAULT_RING_CAPACITY);
  std::vector<std::string> envs;
  for (const auto& row : d::option_table) {
    CHECK(std::string(row.env).rfind("LOTUS_", 0) == 0);
    CHECK(row.doc[0] != '\0');
    for (const auto& e : envs) CHECK(e != row.env);
    envs.emplace_back(row.env);
  }
}

TEST_CASE("option table: a bad environment value gives the one message and the default",
          "[config][options][env]") {
  struct bad_env {
    const char* name;
    const char* value;
    const char* message;
  };
  const bad_env cases[] = {
      {"LOTUS_FLUSH_INTERVAL_MS", "0",
       "lotus: ignoring LOTUS_FLUSH_INTERVAL_MS='0' (expected an integer from 1 to 60000); using "
       "100\n"},
      {"LOTUS_FLUSH_INTERVAL_MS", "60001",
       "lotus: ignoring LOTUS_FLUSH_INTERVAL_MS='60001' (expected an integer from 1 to 60000); "
       "using 100\n"},
      {"LOTUS_RING_CAPACITY", "lots",
       "lotus: ignoring LOTUS_RING_CAPACITY='lots' (expected an integer from 64 to 67108864); "
       "using 32768\n"},
      {"LOTUS_DISABLE", "maybe",
       "lotus: ignoring LOTUS_DISABLE='maybe' (expected 0|false|no|off|1|true|yes|on); using 0\n"},
      {"LOTUS_OVERFLOW", "sometimes",
       "lotus: ignoring LOTUS_OVERFLOW='sometimes' (expected block|drop); using block\n"},
      {"LOTUS_CLOCK", "sundial",
       "lotus: ignoring LOTUS_CLOCK='sundial' (expected auto|tsc|realtime); using auto\n"},
      {"LOTUS_MAX_BYTES", "-1",
       "lotus: ignoring LOTUS_MAX_BYTES='-1' (expected an integer from 0 to 4611686018427387904); "
       "using 1073741824, the fail-closed limit for a malformed value\n"},
      {"LOTUS_MIN_FREE_BYTES", "1G",
       "lotus: ignoring LOTUS_MIN_FREE_BYTES='1G' (expected an integer from 0 to "
       "4611686018427387904); using max(1 GiB, 5 %)\n"},
      {"LOTUS_NVTX", "2",
       "lotus: ignoring LOTUS_NVTX='2' (expected 0|false|no|off|1|true|yes|on); using 0\n"},
      {"LOTUS_ITT", "sure",
       "lotus: ignoring LOTUS_ITT='sure' (expected 0|false|no|off|1|true|yes|on); using 0\n"},
      {"LOTUS_RESOURCES", "sometimes",
       "lotus: ignoring LOTUS_RESOURCES='sometimes' (expected 0|false|no|off|1|true|yes|on|ops); "
       "using 1\n"},
      {"LOTUS_MEMORY_READINGS", "always",
       "lotus: ignoring LOTUS_MEMORY_READINGS='always' (expected budget|eager); using budget\n"},
  };
  const merged defaults = merge({});
  CHECK(defaults.err.empty());
  for (const auto& c : cases) {
    INFO(c.name << "=" << c.value);
    const merged m = merge({}, c.name, c.value);
    CHECK(m.err == c.message);
    CHECK(m.s.enabled == defaults.s.enabled);
    CHECK(m.s.ring_capacity == defaults.s.ring_capacity);
    CHECK(m.s.flush_interval_ms == defaults.s.flush_interval_ms);
    CHECK(m.s.overflow == defaults.s.overflow);
    CHECK(m.s.clock == defaults.s.clock);
    CHECK(m.s.memory_readings == defaults.s.memory_readings);
    CHECK(m.s.max_bytes == (std::string(c.name) == "LOTUS_MAX_BYTES" ? d::max_bytes_fail_closed
                                                                     : defaults.s.max_bytes));
    CHECK(m.s.min_free == defaults.s.min_free);
    CHECK(m.s.nvtx == defaults.s.nvtx);
    CHECK(m.s.itt == defaults.s.itt);
    CHECK(m.s.resources == defaults.s.resources);
    CHECK(m.s.op_resources == defaults.s.op_resources);
  }
  CHECK(defaults.s.flush_interval_ms == 100);
  CHECK(defaults.s.resources);
  CHECK(defaults.s.max_bytes == 0);
  CHECK(defaults.s.min_free == d::min_free_default);
}

TEST_CASE("option table: LOTUS_MEMORY_READINGS and options::memory_readings (default budget)",
          "[config][options][resources]") {
  using policy = lotus::memory_reading_policy;
  CHECK(merge({}).s.memory_readings == policy::budget);
  CHECK(merge({}, "LOTUS_MEMORY_READINGS", "eager").s.memory_readings == policy::eager);
  CHECK(merge({}, "LOTUS_MEMORY_READINGS", "budget").s.memory_readings == policy::budget);
  CHECK(merge({}, "LOTUS_MEMORY_READINGS", "EAGER").s.memory_readings == policy::budget);
  lotus::options o;
  o.memory_readings = policy::budget;  // a field set in configure() overrides the environment
  CHECK(merge(o, "LOTUS_MEMORY_READINGS", "eager").s.memory_readings == policy::budget);
  o.memory_readings = policy::eager;
  CHECK(merge(o).s.memory_readings == policy::eager);
}

TEST_CASE("option table: LOTUS_RESOURCES and options::resources (default on)",
          "[config][options][resources]") {
  for (const char* off : {"0", "off", "no", "false", ""}) {
    INFO(off);
    const merged m = merge({}, "LOTUS_RESOURCES", off);
    CHECK(m.err.empty());
    CHECK_FALSE(m.s.resources);
  }
  CHECK(merge({}, "LOTUS_RESOURCES", "1").s.resources);
  lotus::options o;
  o.resources = true;  // a field set in configure() overrides the environment
  CHECK(merge(o, "LOTUS_RESOURCES", "0").s.resources);
  o.resources = false;
  CHECK_FALSE(merge(o).s.resources);
}

TEST_CASE("option table: LOTUS_RESOURCES=ops and options::op_resources (default off)",
          "[config][options][resources]") {
  CHECK_FALSE(merge({}).s.op_resources);
  CHECK_FALSE(merge({}, "LOTUS_RESOURCES", "1").s.op_resources);
  const merged ops = merge({}, "LOTUS_RESOURCES", "ops");
  CHECK(ops.err.empty());
  CHECK(ops.s.resources);
  CHECK(ops.s.op_resources);
  CHECK(merge({}, "LOTUS_RESOURCES", "OPS").err.find("expected 0|false|no|off|1|true|yes|on|ops") !=
        std::string::npos);
  CHECK_FALSE(merge({}, "LOTUS_RESOURCES", "OPS").s.op_resources);
  lotus::options o;
  o.resources = true;  // on: keeps the environment's per-op figures
  CHECK(merge(o, "LOTUS_RESOURCES", "ops").s.op_resources);
  o.resources = false;  // off: neither
  CHECK_FALSE(merge(o, "LOTUS_RESOURCES", "ops").s.resources);
  CHECK_FALSE(merge(o, "LOTUS_RESOURCES", "ops").s.op_resources);
  o.op_resources = true;  // per op: per batch too
  CHECK(merge(o).s.resources);
  CHECK(merge(o).s.op_resources);
  o.resources.reset();
  o.op_resources = false;  // per batch at most
  const merged batch = merge(o, "LOTUS_RESOURCES", "ops");
  CHECK(batch.s.resources);
  CHECK_FALSE(batch.s.op_resources);
}

TEST_CASE("option table: LOTUS_LIVE and options::live (default on)", "[config][options][live]") {
  CHECK(merge({}).s.live);
  CHECK_FALSE(merge({}, "LOTUS_LIVE", "0").s.live);
  CHECK_FALSE(merge({}, "LOTUS_LIVE", "off").s.live);
  const merged bad = merge({}, "LOTUS_LIVE", "maybe");
  CHECK(bad.s.live);  // refused: the default
  CHECK(bad.err.find(
            "ignoring LOTUS_LIVE='maybe' (expected 0|false|no|off|1|true|yes|on); using 1") !=
        std::string::npos);
  lotus::options o;
  o.live = true;  // a field set in configure() overrides the environment
  CHECK(merge(o, "LOTUS_LIVE", "0").s.live);
  o.live = false;
  CHECK_FALSE(merge(o).s.live);
}

TEST_CASE(
    "option table: a bad lotus::options field gives the same message and keeps the "
    "environment's value or the default",
    "[config][options][configure]") {
  SECTION("flush_interval 0, negative, above 60000: refused (0 was ignored silently before)") {
    lotus::options o;
    o.flush_interval = std::chrono::milliseconds(0);
    merged m = merge(o);
    CHECK(m.err ==
          "lotus: ignoring options::flush_interval='0' (expected an integer from 1 to 60000); "
          "using 100\n");
    CHECK(m.s.flush_interval_ms == 100);
    o.flush_interval = std::chrono::milliseconds(-5);
    m = merge(o, "LOTUS_FLUSH_INTERVAL_MS", "250");
    CHECK(m.err ==
          "lotus: ignoring options::flush_interval='-5' (expected an integer from 1 to 60000); "
          "using 250\n");
    CHECK(m.s.flush_interval_ms == 250);
    o.flush_interval = std::chrono::milliseconds(60001);
    m = merge(o);
    CHECK(m.err ==
          "lotus: ignoring options::flush_interval='60001' (expected an integer from 1 to "
          "60000); using 100\n");
    CHECK(m.s.flush_interval_ms == 100);
    o.flush_interval = std::chrono::milliseconds(60000);
    m = merge(o);
    CHECK(m.err.empty());
    CHECK(m.s.flush_interval_ms == 60000);
  }
  SECTION("ring_capacity") {
    lotus::options o;
    o.ring_capacity = 10;
    merged m = merge(o);
    CHECK(m.err ==
          "lotus: ignoring options::ring_capacity='10' (expected an integer from 64 to "
          "67108864); using 32768\n");
    CHECK(m.s.ring_capacity == 32768);
    o.ring_capacity = std::size_t{1} << 27;
    m = merge(o, "LOTUS_RING_CAPACITY", "1024");
    CHECK(m.err ==
          "lotus: ignoring options::ring_capacity='134217728' (expected an integer from 64 to "
          "67108864); using 1024\n");
    CHECK(m.s.ring_capacity == 1024);
  }
  SECTION("max_bytes and min_free_bytes") {
    lotus::options o;
    o.max_bytes = (std::uint64_t{1} << 62) + 1;
    o.min_free_bytes = ~std::uint64_t{0};
    const merged m = merge(o, "LOTUS_MAX_BYTES", "5000");
    CHECK(m.err ==
          "lotus: ignoring options::max_bytes='4611686018427387905' (expected an integer from 0 "
          "to 4611686018427387904); using 5000\n"
          "lotus: ignoring options::min_free_bytes='18446744073709551615' (expected an integer "
          "from 0 to 4611686018427387904); using max(1 GiB, 5 %)\n");
    CHECK(m.s.max_bytes == 5000);
    CHECK(m.s.min_free == d::min_free_default);
  }
  SECTION("values within range are taken over the environment") {
    lotus::options o;
    o.max_bytes = 0;
    o.min_free_bytes = 0;
    o.ring_capacity = 64;
    o.flush_interval = std::chrono::milliseconds(1);
    const merged m = merge(o, "LOTUS_MAX_BYTES", "5000");
    CHECK(m.err.empty());
    CHECK(m.s.max_bytes == 0);
    CHECK(m.s.min_free == 0);
    CHECK(m.s.ring_capacity == 64);
    CHECK(m.s.flush_interval_ms == 1);
  }
}

TEST_CASE("option table: collector and map variables take range and default from the table",
          "[config][options][collector]") {
  struct bad_env {
    lotus::detail::opt o;
    const char* value;
    const char* message;
  };
  const bad_env cases[] = {
      {d::opt::map_warmup, "one",
       "lotus: ignoring LOTUS_MAP_WARMUP='one' (expected an integer from 0 to 1099511627776); "
       "using 1\n"},
      {d::opt::map_count, "-1",
       "lotus: ignoring LOTUS_MAP_COUNT='-1' (expected an integer from 0 to 1099511627776); "
       "using 1\n"},
      {d::opt::map_gap_ms, "3600001",
       "lotus: ignoring LOTUS_MAP_GAP_MS='3600001' (expected an integer from 0 to 3600000); "
       "using 0\n"},
      {d::opt::perf_ack_timeout_ms, "x",
       "lotus: ignoring LOTUS_PERF_ACK_TIMEOUT_MS='x' (expected an integer from 0 to 3600000); "
       "using 5000\n"},
      {d::opt::perf_wait_ms, "soon",
       "lotus: ignoring LOTUS_PERF_WAIT_MS='soon' (expected an integer from 0 to 3600000); "
       "using 0\n"},
  };
  for (const auto& c : cases) {
    const auto& row = d::option_of(c.o);
    INFO(row.env << "=" << c.value);
    std::uint64_t got = 12345;
    const std::string err = captured_stderr([&] {
      set_only(row.env, c.value);
      got = d::collector_env_u64(c.o);
    });
    CHECK(err == c.message);
    CHECK(got == row.def);
  }
  const std::string err = captured_stderr([&] {
    set_only("LOTUS_COLLECTOR", "vtunes");
    CHECK(d::env_option_choice(d::opt::collector) == -1);
  });
  CHECK(err ==
        "lotus: ignoring LOTUS_COLLECTOR='vtunes' (expected "
        "auto|none|perf|itt|vtune|amd|uprof|callgrind); using auto\n");
  set_only(nullptr, nullptr);
}

// Issue #53 item 9: a duration that does not fit (it wrapped: 18446744074 s became 290 ms and
// fired) is refused with the one message; a value's control bytes are escaped in the message,
// so a newline in a variable cannot forge a line of its own.
TEST_CASE("option table: out-of-range trigger durations are refused; values are escaped",
          "[config][options][env]") {
  for (const char* v : {"wait>18446744074s", "wait>307445734562min", "waitshare>50%/18446744074s",
                        "wait>2day", "wait>86401s", "waitshare>50%/1441min"}) {
    INFO(v);
    const merged m = merge({}, "LOTUS_TRIGGER", v);
    CHECK(m.err.rfind(std::string("lotus: ignoring LOTUS_TRIGGER='") + v + "' (expected ", 0) == 0);
    CHECK(m.s.flight.wait_ns == 0);
    CHECK(m.s.flight.share_window_ns == 0);
  }
  const merged ok = merge({}, "LOTUS_TRIGGER", "wait>1440min, waitshare>5%/86400s");
  CHECK(ok.err.empty());
  CHECK(ok.s.flight.wait_ns == 86400000000000u);
  lotus::options o;
  o.trigger = "wait>99999999999999s";
  const merged f = merge(o);
  CHECK(f.err.rfind("lotus: ignoring options::trigger='wait>99999999999999s' (expected ", 0) == 0);
  CHECK(f.s.flight.wait_ns == 0);

  const merged nl = merge({}, "LOTUS_FLUSH_INTERVAL_MS", "1\nlotus: forged\x1b[2J");
  CHECK(nl.err ==
        "lotus: ignoring LOTUS_FLUSH_INTERVAL_MS='1\\nlotus: forged\\x1b[2J' (expected an integer "
        "from 1 to 60000); using 100\n");
  const merged tn = merge({}, "LOTUS_TRIGGER", "wait>1s\nlotus: forged");
  CHECK(tn.err.rfind("lotus: ignoring LOTUS_TRIGGER='wait>1s\\nlotus: forged' (expected ", 0) == 0);
  CHECK(std::count(tn.err.begin(), tn.err.end(), '\n') == 1);
}

// Architecture v5, item 4: a row carries its field and value mapping, so the environment's
// reading, the merge and the docs' text are loops over the table. A table with one more row
// (a fake knob: uint 1..10, default 3) gets it everywhere, with no code outside the row (but for
// Python's configure: option_put's case, which -Wswitch asks for).
namespace {

struct fake_options : lotus::options {
  std::optional<std::uint64_t> fake_knob;
};
struct fake_settings : d::settings {
  std::uint64_t fake_knob = 0;
};

constexpr d::option_desc fake_row = {
    "fake_knob",
    "LOTUS_FAKE_KNOB",
    d::option_kind::uint,
    1,
    10,
    3,
    nullptr,
    nullptr,
    0,
    "a knob of this test only",
    {[](const lotus::options& o, d::option_value& v) {
       const auto& f = static_cast<const fake_options&>(o).fake_knob;
       v.n = f.value_or(0);
       return f.has_value();
     },
     [](d::settings& s, std::uint64_t v) { static_cast<fake_settings&>(s).fake_knob = v; }, nullptr,
     nullptr, false}};

struct fake_table {
  std::vector<d::option_desc> rows;
  fake_table() : rows(std::begin(d::option_table), std::end(d::option_table)) {
    rows.push_back(fake_row);
  }
};

struct fake_merged {
  fake_settings s;
  d::env_value env_knob;
  std::string err;
};

/// The fake table's environment (only `name`=`value` set, LOTUS_FAKE_KNOB included) merged
/// under `o`.
fake_merged fake_merge(const fake_options& o, const char* name = nullptr,
                       const char* value = nullptr) {
  const fake_table t;
  fake_merged m;
  m.err = captured_stderr([&] {
    set_only(name, value);
    if (name == nullptr || std::string(name) != "LOTUS_FAKE_KNOB") ::unsetenv("LOTUS_FAKE_KNOB");
    std::vector<d::env_value> values(t.rows.size());
    d::env_settings env;
    d::env_read_rows(t.rows.data(), t.rows.size(), values.data(), env);
    d::merge_rows(t.rows.data(), t.rows.size(), o, values.data(), env, m.s);
    m.env_knob = values.back();
  });
  set_only(nullptr, nullptr);
  ::unsetenv("LOTUS_FAKE_KNOB");
  return m;
}

}  // namespace

TEST_CASE("option table: a row added to the table is read, merged and documented by the loops",
          "[config][options][table]") {
  SECTION("the environment: parsed, or refused with the one message and the default") {
    fake_merged m = fake_merge({});
    CHECK(m.err.empty());
    CHECK_FALSE(m.env_knob.set);
    CHECK(m.s.fake_knob == 3);  // the row's default
    m = fake_merge({}, "LOTUS_FAKE_KNOB", "7");
    CHECK(m.err.empty());
    CHECK(m.env_knob.set);
    CHECK(m.s.fake_knob == 7);
    for (const char* bad : {"0", "11", "lots", "-1"}) {
      INFO(bad);
      m = fake_merge({}, "LOTUS_FAKE_KNOB", bad);
      CHECK(m.err == std::string("lotus: ignoring LOTUS_FAKE_KNOB='") + bad +
                         "' (expected an integer from 1 to 10); using 3\n");
      CHECK_FALSE(m.env_knob.set);
      CHECK(m.s.fake_knob == 3);
    }
  }
  SECTION("options over the environment over the default; a bad field keeps the environment's") {
    fake_options o;
    o.fake_knob = 9;
    CHECK(fake_merge(o).s.fake_knob == 9);
    CHECK(fake_merge(o, "LOTUS_FAKE_KNOB", "5").s.fake_knob == 9);
    o.fake_knob = 12;
    fake_merged m = fake_merge(o, "LOTUS_FAKE_KNOB", "5");
    CHECK(m.err ==
          "lotus: ignoring options::fake_knob='12' (expected an integer from 1 to 10); using 5\n");
    CHECK(m.s.fake_knob == 5);
    m = fake_merge(o);
    CHECK(m.err ==
          "lotus: ignoring options::fake_knob='12' (expected an integer from 1 to 10); using 3\n");
    CHECK(m.s.fake_knob == 3);
  }
  SECTION("the other rows merge as with the real table") {
    fake_options o;
    o.flush_interval = std::chrono::milliseconds(250);
    o.fake_knob = 4;
    const fake_merged m = fake_merge(o, "LOTUS_RESOURCES", "ops");
    const merged real = merge(o, "LOTUS_RESOURCES", "ops");
    CHECK(m.err == real.err);
    CHECK(m.s.flush_interval_ms == 250);
    CHECK(m.s.flight.margin_ns == real.s.flight.margin_ns);
    CHECK(m.s.op_resources);
    CHECK(m.s.fake_knob == 4);
  }
  SECTION("the docs' text: what a value must be, the default") {
    char expected[160], shown[96];
    d::option_expected(fake_row, expected, sizeof expected);
    CHECK(std::string(expected) == "an integer from 1 to 10");
    d::option_value_text(fake_row, fake_row.def, shown, sizeof shown);
    CHECK(std::string(shown) == "3");
  }
}

TEST_CASE("option table: each setting row says how its value moves", "[config][options][table]") {
  for (const auto& row : d::option_table) {
    INFO(row.env);
    const bool setting = row.bind.apply != nullptr || row.bind.merge != nullptr;
    CHECK(setting == (row.field != nullptr));  // a settings field iff a lotus::options field
    // Python's configure can set each of them (option_put), and the merge reads what it set:
    // the table's default spelled as a value, put, then merged, gives the default's setting.
    lotus::options o;
    d::option_value v;
    v.n = row.kind == d::option_kind::flag ? d::option_flag_truth(row, row.def) : row.def;
    v.index = row.kind == d::option_kind::flag ? static_cast<int>(row.def) : -1;
    v.text = "";
    CHECK(d::option_put(static_cast<d::opt>(&row - d::option_table), o, v) == setting);
    if (row.kind == d::option_kind::prefix || row.kind == d::option_kind::path) {
      CHECK((row.bind.read != nullptr) == setting);
    }
  }
}

TEST_CASE("option table: Python's configure puts each keyword where the merge reads it",
          "[config][options][table]") {
  // A value other than the default for each kind of row, through option_put, then the merge.
  lotus::options o;
  const auto put = [&](d::opt row, std::uint64_t n, int index = -1, const char* text = "") {
    d::option_value v;
    v.n = n;
    v.index = index;
    v.text = text;
    v.size = std::strlen(text);
    REQUIRE(d::option_put(row, o, v));
  };
  put(d::opt::ring_capacity, 1000);
  put(d::opt::flush_interval, 250);
  put(d::opt::overflow, 1);
  put(d::opt::enabled, 0);
  put(d::opt::resources, 1, d::option_resources_ops);
  put(d::opt::flight, 30);
  put(d::opt::trigger, 0, -1, "wait>2s");
  CHECK(o.ring_capacity == std::size_t{1000});
  CHECK(o.flush_interval == std::chrono::milliseconds(250));
  CHECK(o.overflow == lotus::overflow_policy::drop);
  CHECK(o.enabled == false);
  CHECK(o.resources == true);
  CHECK(o.op_resources == true);
  const merged m = merge(o);
  CHECK(m.err.empty());
  CHECK(m.s.ring_capacity == 1024);  // rounded up to a power of two by the row's apply
  CHECK(m.s.flush_interval_ms == 250);
  CHECK(m.s.overflow == lotus::overflow_policy::drop);
  CHECK_FALSE(m.s.enabled);
  CHECK(m.s.op_resources);
  CHECK(m.s.flight.window_ns == 30000000000ull);
  CHECK(m.s.flight.wait_ns == 2000000000ull);
  // A row without a lotus::options field takes nothing.
  d::option_value v;
  CHECK_FALSE(d::option_put(d::opt::collector, o, v));
  // What a text value must be: the trigger's grammar, no control character in a prefix.
  CHECK(d::option_text_problem(d::opt::trigger, "wait>2s", 7) == nullptr);
  CHECK(d::option_text_problem(d::opt::trigger, "wait>", 5) != nullptr);
  CHECK(d::option_text_problem(d::opt::log_file, "a\nb", 3) != nullptr);
  CHECK(d::option_text_problem(d::opt::log_file, "trace/t", 7) == nullptr);
}
