// lotus — lotus._lotus: the trace reader of lotus.frame and lotus.loaders (lotus-tool's format/)
// SPDX-License-Identifier: MIT
// Nothing of the format is parsed here: records and lines, file names, the sidecars' identity
// lines, the batch kinds and the definition of an epoch are lotus-tool's format library
// (tools/lotus-tool/format/), compiled into the module; this file turns what it reads into
// Python objects and lotus.frame's columns.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "_lotus.hpp"
#include "format/batch_kinds.hpp"
#include "format/epochs.hpp"
#include "format/line_reader.hpp"
#include "format/trace_files.hpp"
#include "util/error.hpp"

namespace lotus_python {

namespace {

namespace fmt = lotus_tool;

/// A str of bytes the trace holds (names of any bytes: undecodable ones kept as surrogates).
py::object text(std::string_view s) {
  PyObject* o =
      PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "surrogateescape");
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(o);
}

/// A tool_error's message without the path it starts with.
std::string reason(const fmt::tool_error& e, const std::string& path) {
  std::string why = e.what();
  const std::string head = path + ": ";
  if (why.compare(0, head.size(), head) == 0) why.erase(0, head.size());
  return why;
}

/// The records of the files read so far, one entry per record in each column.
struct columns {
  std::vector<std::int32_t> code;   // index into names
  std::vector<std::int64_t> batch;  // the batch index, -1 for op records
  std::vector<std::int64_t> start;
  std::vector<std::int64_t> dur;
  std::vector<fmt::batch_kind> kind;
  std::vector<std::string> names;  // op names as in the trace; batch kinds without the index
  std::unordered_map<std::string, std::int32_t> index;
  std::string key;  // intern's scratch
  std::int32_t last = -1;

  std::int32_t intern(std::string_view name) {
    if (last >= 0 && names[static_cast<std::size_t>(last)] == name) return last;
    key.assign(name.data(), name.size());
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, static_cast<std::int32_t>(names.size())).first;
      names.push_back(key);
    }
    return last = it->second;
  }

  void add(const fmt::record& r, const fmt::batch_ref& b) {
    const fmt::batch_kind_row* row = fmt::batch_kind_of(b.kind);
    if (row != nullptr) {
      key.assign(1, 'S');
      key.append(row->stem.data(), row->stem.size());
      code.push_back(intern(std::string(key)));
    } else {
      code.push_back(intern(r.name));
    }
    batch.push_back(row != nullptr ? static_cast<std::int64_t>(b.idx) : -1);
    start.push_back(static_cast<std::int64_t>(r.start_ns));
    dur.push_back(static_cast<std::int64_t>(r.dur_ns));
    kind.push_back(b.kind);
  }
};

/// Adds one trace file's records to `c`, counting the lines lotus-tool would skip; the reason
/// it was not read (as lotus-tool opens it), else an empty string.
std::string read_file(const std::string& path, columns& c, std::int64_t& skipped) {
  try {
    fmt::for_each_line(path, [&](const fmt::line_reader::line&, const char* why,
                                 const fmt::record& r, const fmt::batch_ref& b) {
      if (why != nullptr) {
        ++skipped;
      } else {
        c.add(r, b);
      }
    });
  } catch (const fmt::tool_error& e) {
    return reason(e, path);
  }
  return {};
}

/// `epoch` of each batch record, by format/epochs.hpp: a main file's by the cut of its records
/// (with its process's start-ups); any other batch record of a group (>= 0) the epoch of the
/// group's main files begun last at or before its start; -1 elsewhere.
std::vector<std::int64_t> epochs(const columns& c, const std::vector<std::int64_t>& rows,
                                 const std::vector<std::int64_t>& group,
                                 const std::vector<bool>& main,
                                 const std::vector<std::vector<fmt::startup_span>>& startups) {
  struct begun {
    std::int64_t group;
    std::uint64_t start;
    std::int64_t epoch;
  };
  std::vector<std::int64_t> out(c.code.size(), -1);
  std::vector<begun> spans;
  std::vector<std::size_t> row_of;
  std::vector<fmt::main_rec> recs;
  std::size_t r0 = 0;
  for (std::size_t f = 0; f < rows.size(); r0 += static_cast<std::size_t>(rows[f]), ++f) {
    if (group[f] < 0 || !main[f]) continue;
    recs.clear();
    row_of.clear();
    for (std::size_t r = r0; r < r0 + static_cast<std::size_t>(rows[f]); ++r) {
      fmt::main_rec m{};
      const fmt::record rec{
          {}, static_cast<std::uint64_t>(c.start[r]), static_cast<std::uint64_t>(c.dur[r])};
      const fmt::batch_ref b{c.kind[r], static_cast<std::uint64_t>(c.batch[r])};
      if (fmt::main_rec_of(rec, b, m)) {
        recs.push_back(m);
        row_of.push_back(r);
      }
    }
    if (recs.empty()) continue;  // no batch records: no epochs (lotus-tool's rule)
    for (const fmt::startup_span& s : startups[f]) {
      recs.push_back(fmt::startup_rec(s.first, static_cast<double>(s.second - s.first) / 1e6));
    }
    std::vector<fmt::epoch_digest> digests;
    const std::vector<std::int64_t> e = fmt::main_epoch_of(recs, &digests);
    for (std::size_t i = 0; i < row_of.size(); ++i) out[row_of[i]] = e[i];
    for (std::size_t k = 0; k < digests.size(); ++k) {
      spans.push_back({group[f], digests[k].start_ns, static_cast<std::int64_t>(k)});
    }
  }
  std::stable_sort(spans.begin(), spans.end(), [](const begun& a, const begun& b) {
    return a.group != b.group ? a.group < b.group : a.start < b.start;
  });
  r0 = 0;
  for (std::size_t f = 0; f < rows.size(); r0 += static_cast<std::size_t>(rows[f]), ++f) {
    if (group[f] < 0) continue;
    for (std::size_t r = r0; r < r0 + static_cast<std::size_t>(rows[f]); ++r) {
      if (c.batch[r] < 0 || (main[f] && c.kind[r] != fmt::batch_kind::preprocessed)) continue;
      const auto start = static_cast<std::uint64_t>(c.start[r]);
      auto it =
          std::upper_bound(spans.begin(), spans.end(), std::make_pair(group[f], start),
                           [](const std::pair<std::int64_t, std::uint64_t>& v, const begun& s) {
                             return v.first != s.group ? v.first < s.group : v.second < s.start;
                           });
      if (it != spans.begin() && std::prev(it)->group == group[f]) out[r] = std::prev(it)->epoch;
    }
  }
  return out;
}

/// A column as a bytearray (numpy.frombuffer makes a writable array of it without a copy);
/// the vector is freed.
template <class T>
py::object column_bytes(std::vector<T>& v) {
  PyObject* b = PyByteArray_FromStringAndSize(reinterpret_cast<const char*>(v.data()),
                                              static_cast<Py_ssize_t>(v.size() * sizeof(T)));
  if (b == nullptr) throw py::error_already_set();
  std::vector<T>().swap(v);
  return py::reinterpret_steal<py::object>(b);
}

/// _read_traces(paths, groups, mains, startups): the files' records in file then line order.
py::tuple read_traces(const std::vector<std::string>& paths, const std::vector<std::int64_t>& group,
                      const std::vector<bool>& main,
                      const std::vector<std::vector<fmt::startup_span>>& startups) {
  if (group.size() != paths.size() || main.size() != paths.size() ||
      startups.size() != paths.size()) {
    throw py::value_error("_read_traces: one group, role and start-up list per path");
  }
  columns c;
  std::vector<std::int64_t> rows(paths.size(), 0);
  std::vector<std::int64_t> skipped(paths.size(), 0);
  std::vector<std::string> errors(paths.size());
  std::vector<std::int64_t> epoch;
  {
    py::gil_scoped_release unlocked;
    for (std::size_t f = 0; f < paths.size(); ++f) {
      const std::size_t before = c.code.size();
      errors[f] = read_file(paths[f], c, skipped[f]);
      rows[f] = static_cast<std::int64_t>(c.code.size() - before);
    }
    epoch = epochs(c, rows, group, main, startups);
  }
  py::list names;
  for (const std::string& n : c.names) names.append(text(n));
  py::list why;
  for (const std::string& e : errors) {
    why.append(e.empty() ? py::object(py::none()) : py::object(py::str(e)));
  }
  return py::make_tuple(names, column_bytes(c.code), column_bytes(c.batch), column_bytes(epoch),
                        column_bytes(c.start), column_bytes(c.dur), column_bytes(rows),
                        column_bytes(skipped), why);
}

/// _trace_files(directory, sidecars): ([(name, role, tid, size, pid, host, rank, startups)],
/// [(sidecar name, why not read)]).
py::tuple trace_files(const std::string& directory, bool sidecars) {
  fmt::trace_listing l;
  {
    py::gil_scoped_release unlocked;
    try {
      l = fmt::list_trace_files(directory, sidecars);
    } catch (const fmt::tool_error& e) {
      py::gil_scoped_acquire locked;
      throw py::value_error(e.what());
    }
  }
  py::list files;
  for (const fmt::listed_file& f : l.files) {
    files.append(py::make_tuple(
        py::bytes(f.name), f.kind == fmt::file_kind::main ? "main" : "worker", f.tid, f.size, f.pid,
        f.host.empty() ? py::object(py::none()) : text(f.host),
        f.rank ? py::object(py::int_(*f.rank)) : py::object(py::none()), f.startups));
  }
  py::list unread;
  for (const auto& u : l.unread) unread.append(py::make_tuple(py::bytes(u.first), u.second));
  return py::make_tuple(files, unread);
}

/// _read_records(path): [(name, start_ns, dur_ns)] of the file's records, in order; lines
/// lotus-tool would skip are skipped. OSError when it cannot be read.
py::list read_records(const std::string& path) {
  std::vector<std::tuple<std::string, std::uint64_t, std::uint64_t>> recs;
  try {
    fmt::for_each_line(path, [&](const fmt::line_reader::line&, const char* why,
                                 const fmt::record& r, const fmt::batch_ref&) {
      if (why == nullptr) recs.emplace_back(std::string(r.name), r.start_ns, r.dur_ns);
    });
  } catch (const fmt::tool_error& e) {
    PyErr_SetString(PyExc_OSError, e.what());
    throw py::error_already_set();
  }
  py::list out;
  for (const auto& [name, start, dur] : recs) out.append(py::make_tuple(text(name), start, dur));
  return out;
}

/// _batch_kind(name): (word, idx) of a batch record's name (BATCH_KINDS' words), else None.
py::object batch_kind(const std::string& name) {
  fmt::batch_ref b;
  if (fmt::classify(name, b) != nullptr) return py::none();
  const fmt::batch_kind_row* row = fmt::batch_kind_of(b.kind);
  if (row == nullptr) return py::none();
  return py::make_tuple(std::string(row->word), b.idx);
}

}  // namespace

void add_format(py::module_& m) {
  py::list kinds;
  for (const fmt::batch_kind_row& r : fmt::k_batch_kinds) kinds.append(std::string(r.word));
  m.attr("BATCH_KINDS") = py::tuple(kinds);
  m.attr("MARKER_NS") = fmt::k_marker_ns;
  m.def("_read_traces", &read_traces, py::arg("paths"), py::arg("groups"), py::arg("mains"),
        py::arg("startups"),
        "lotus.frame's reader: the records of trace files (paths: bytes) by lotus-tool's format "
        "library, as (names, code int32, batch int64, epoch int64, start int64, dur int64, rows "
        "per file, skipped lines per file, why each file was not read or None); the column "
        "arrays are bytearrays, batch and epoch -1 where NA. Epochs by lotus-tool's cut of each "
        "main file (mains: whether each file is one; startups: its process's iterator "
        "start-ups, (begin_ns, init_end_ns)), shared with the other files of its group (-1: "
        "none).");
  m.def("_trace_files", &trace_files, py::arg("directory"), py::arg("sidecars") = true,
        "The trace files of a directory (bytes) by lotus-tool's rules, sorted by name: "
        "([(name, role, tid, size, pid, host, rank, startups)], [(sidecar, why not read)]); "
        "sidecars=False: names and sizes only (pid = tid, no host, rank, start-ups).");
  m.def("_read_records", &read_records, py::arg("path"),
        "The records of one trace file by lotus-tool's rules: [(name, start_ns, dur_ns)], the "
        "lines it would skip skipped.");
  m.def("_batch_kind", &batch_kind, py::arg("name"),
        "(word, idx) of a batch record's name, word one of BATCH_KINDS; None for any other.");
}

}  // namespace lotus_python
