// lotus — lotus-tool viz: Perfetto's native protobuf trace (the `.pftrace` output of viz)
// SPDX-License-Identifier: MIT
//
// Encoding (field numbers: tools/lotus-tool/viz/perfetto_trace.proto, from Perfetto's trace proto
// reference). The file is a `Trace`: a sequence of `packet` fields.
// - Sequence 1 holds the track descriptors: one per process (pid, name), per thread (pid, tid,
//   name), per extra lane of a thread (records of one file that do not nest: parent = its thread)
//   and per counter track.
// - Every other track is written by a sequence of its own. Its first packet clears the incremental
//   state, sets the packet defaults (the track, and clock 64) and a clock snapshot that defines
//   clock 64 as an incremental nanosecond clock equal to CLOCK_REALTIME (the trace's primary
//   clock): the packets after it carry timestamps as deltas from the previous packet of their
//   sequence, so each sequence is written in time order. Event names are interned per sequence
//   (InternedData.event_names, emitted with the first event that uses them).
// - A record is one slice: a SLICE_BEGIN at its start and a SLICE_END at its end, exact in ns.
//   Records of a file that do not nest (batch records of a main file) go to extra lanes.
// - Batch records carry flow ids: SBatchQueued → SBatchPreprocessed → SBatchWait →
//   SBatchConsumed of one (trace part, epoch, index), terminating at SBatchConsumed. An
//   out-of-order arrival (the 1 µs SBatchWait marker) adds an instant event "out-of-order arrival".
// - Counter tracks per trace part (a directory or rank): batches in flight (queued, not yet
//   preprocessed), batches ready (preprocessed, not yet consumed) and busy workers (inside an
//   SBatchPreprocessed span).
#include "viz/perfetto.hpp"

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <string_view>
#include <unordered_map>

#include "util/error.hpp"
#include "util/spill.hpp"

#ifdef LOTUS_TOOL_ZLIB
#  include <zlib.h>
#endif

namespace lotus_tool {

bool wants_perfetto(const std::string& output, const std::string& format) {
  if (format == "perfetto") return true;
  const auto ends = [&](std::string_view sfx) {
    return output.size() >= sfx.size() &&
           output.compare(output.size() - sfx.size(), sfx.size(), sfx) == 0;
  };
  return format.empty() && (ends(".pftrace") || ends(".perfetto-trace"));
}

bool perfetto_compression_available() {
#ifdef LOTUS_TOOL_ZLIB
  return true;
#else
  return false;
#endif
}

namespace {

// ---- protobuf wire format ----

void put_varint(std::string& b, std::uint64_t v) {
  char tmp[10];
  int n = 0;
  while (v >= 0x80) {
    tmp[n++] = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  tmp[n++] = static_cast<char>(v);
  b.append(tmp, static_cast<std::size_t>(n));
}
void put_tag(std::string& b, unsigned field, unsigned wire) { put_varint(b, (field << 3) | wire); }
void put_uint(std::string& b, unsigned field, std::uint64_t v) {
  put_tag(b, field, 0);
  put_varint(b, v);
}
void put_int(std::string& b, unsigned field, std::int64_t v) {
  put_uint(b, field, static_cast<std::uint64_t>(v));  // int32/int64: two's complement varint
}
void put_bytes(std::string& b, unsigned field, std::string_view s) {
  put_tag(b, field, 2);
  put_varint(b, s.size());
  b.append(s.data(), s.size());
}
void put_fixed64(std::string& b, unsigned field, std::uint64_t v) {
  put_tag(b, field, 1);
  char tmp[8];
  for (int i = 0; i < 8; ++i) tmp[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  b.append(tmp, 8);
}

// Field numbers (perfetto_trace.proto).
enum : unsigned {
  k_trace_packet = 1,
  // TracePacket
  k_clock_snapshot = 6,
  k_timestamp = 8,
  k_seq_id = 10,
  k_track_event = 11,
  k_interned_data = 12,
  k_sequence_flags = 13,
  k_compressed_packets = 50,
  k_timestamp_clock_id = 58,
  k_packet_defaults = 59,
  k_track_descriptor = 60,
  // TrackEvent
  k_te_type = 9,
  k_te_name_iid = 10,
  k_te_track_uuid = 11,
  k_te_name = 23,
  k_te_counter_value = 30,
  k_te_flow_ids = 47,
  k_te_terminating_flow_ids = 48,
  // TrackDescriptor
  k_td_uuid = 1,
  k_td_name = 2,
  k_td_process = 3,
  k_td_thread = 4,
  k_td_parent_uuid = 5,
  k_td_counter = 8,
};
constexpr std::uint64_t k_type_begin = 1, k_type_end = 2, k_type_instant = 3, k_type_counter = 4;
constexpr std::uint64_t k_seq_cleared = 1;     // SEQ_INCREMENTAL_STATE_CLEARED
constexpr std::uint64_t k_clock_realtime = 1;  // BUILTIN_CLOCK_REALTIME
constexpr std::uint64_t k_clock_delta = 64;    // a sequence-scoped clock of ours

// A name of the trace: an interned id (iid >= 1), or for names beyond k_max_interned an index
// into the current file's own list (high bit set).
constexpr std::uint32_t k_local_name = 0x80000000u;
constexpr std::size_t k_max_interned = std::size_t{1} << 16;
constexpr std::uint32_t k_batch_name = k_local_name - 1;  // SBatch<Kind>_<idx> as written

std::string canonical_batch_name(batch_kind kind, std::uint64_t idx) {
  const char* k = kind == batch_kind::queued         ? "SBatchQueued_"
                  : kind == batch_kind::preprocessed ? "SBatchPreprocessed_"
                  : kind == batch_kind::wait         ? "SBatchWait_"
                  : kind == batch_kind::consumed     ? "SBatchConsumed_"
                                                     : nullptr;
  return k == nullptr ? std::string() : k + std::to_string(idx);
}

struct item {
  std::uint64_t start, end, idx, epoch, seq;
  std::uint32_t name;
  std::uint32_t kind;  // batch_kind, and bit 8: an out-of-order arrival marker
};
constexpr std::uint32_t k_marker = 0x100;

struct counter_change {
  std::uint64_t ts;
  std::uint32_t key;  // part * 3 + counter
  std::int32_t delta;
};
const char* const k_counter_names[3] = {"batches in flight (queued, not preprocessed)",
                                        "batches ready (preprocessed, not consumed)",
                                        "busy workers (in SBatchPreprocessed)"};

// A flow id unique across trace parts, epochs and indices (a 64-bit mix of the three).
std::uint64_t flow_id(std::uint32_t part, std::uint64_t epoch, std::uint64_t idx) {
  std::uint64_t h = 0x9e3779b97f4a7c15ULL ^ part;
  for (std::uint64_t v : {epoch, idx}) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 31;
  }
  return h == 0 ? 1 : h;
}

class pf_writer {
 public:
  pf_writer(output_file& out, bool compress) : out_(out), compress_(compress) {}

  void packet(std::string_view body) {
    std::string& b = compress_ ? pending_ : out_.buffer();
    char head[12];
    std::size_t n = 0;
    head[n++] = static_cast<char>((k_trace_packet << 3) | 2);
    for (std::uint64_t v = body.size();; v >>= 7) {
      head[n++] = static_cast<char>(v >= 0x80 ? (v & 0x7f) | 0x80 : v);
      if (v < 0x80) break;
    }
    b.append(head, n);
    b.append(body.data(), body.size());
    if (compress_) {
      if (pending_.size() >= (std::size_t{1} << 20)) flush_compressed();
    } else {
      out_.maybe_flush();
    }
  }

  void finish() {
    if (compress_) flush_compressed();
  }

  std::uint32_t new_sequence() { return next_seq_++; }
  std::uint64_t new_uuid() { return next_uuid_++; }

 private:
  void flush_compressed() {
    if (pending_.empty()) return;
#ifdef LOTUS_TOOL_ZLIB
    uLongf n = compressBound(static_cast<uLong>(pending_.size()));
    std::string z(n, '\0');
    if (compress2(reinterpret_cast<Bytef*>(&z[0]), &n,
                  reinterpret_cast<const Bytef*>(pending_.data()),
                  static_cast<uLong>(pending_.size()), 6) != Z_OK) {
      throw tool_error(exit_io, "zlib: compression failed");
    }
    z.resize(n);
    std::string body;
    put_bytes(body, k_compressed_packets, z);
    std::string& b = out_.buffer();
    put_tag(b, k_trace_packet, 2);
    put_varint(b, body.size());
    b += body;
    out_.maybe_flush();
#endif
    pending_.clear();
  }

  output_file& out_;
  bool compress_;
  std::string pending_;
  std::uint32_t next_seq_ = 2;  // 1: descriptors
  std::uint64_t next_uuid_ = 1;
};

// One track written by one sequence, in time order.
struct lane {
  std::uint32_t seq = 0;
  std::uint64_t uuid = 0;
  std::uint64_t last_ts = 0;
  std::vector<std::uint64_t> open;      // end times of the open slices, innermost last
  std::vector<std::uint32_t> interned;  // iids this sequence has defined, sorted
};

class trace_builder {
 public:
  trace_builder(pf_writer& w) : w_(w) {}

  void descriptor(const std::string& body) {
    std::string p;
    put_uint(p, k_seq_id, 1);
    put_bytes(p, k_track_descriptor, body);
    w_.packet(p);
  }

  std::uint64_t process_track(std::uint64_t pid, const std::string& name) {
    const std::uint64_t uuid = w_.new_uuid();
    std::string pd, td;
    put_int(pd, 1, static_cast<std::int32_t>(pid));  // ProcessDescriptor.pid
    put_bytes(pd, 6, name);                          // ProcessDescriptor.process_name
    put_uint(td, k_td_uuid, uuid);
    put_bytes(td, k_td_process, pd);
    descriptor(td);
    return uuid;
  }

  std::uint64_t thread_track(std::uint64_t pid, std::uint64_t tid, const std::string& name) {
    const std::uint64_t uuid = w_.new_uuid();
    std::string th, td;
    put_int(th, 1, static_cast<std::int32_t>(pid));  // ThreadDescriptor.pid
    put_int(th, 2, static_cast<std::int32_t>(tid));  // ThreadDescriptor.tid
    put_bytes(th, 5, name);                          // ThreadDescriptor.thread_name
    put_uint(td, k_td_uuid, uuid);
    put_bytes(td, k_td_thread, th);
    descriptor(td);
    return uuid;
  }

  std::uint64_t child_track(std::uint64_t parent, const std::string& name, bool counter) {
    const std::uint64_t uuid = w_.new_uuid();
    std::string td;
    put_uint(td, k_td_uuid, uuid);
    if (parent != 0) put_uint(td, k_td_parent_uuid, parent);
    put_bytes(td, k_td_name, name);
    if (counter) {
      std::string cd;
      put_bytes(cd, 6, "count");  // CounterDescriptor.unit_name
      put_bytes(td, k_td_counter, cd);
    }
    descriptor(td);
    return uuid;
  }

  /// A new sequence for `track`, its clock starting at `t0` (absolute ns).
  lane start(std::uint64_t track, std::uint64_t t0) {
    lane l;
    l.seq = w_.new_sequence();
    l.uuid = track;
    l.last_ts = t0;
    std::string p, defaults, ted, snap, clock;
    put_uint(p, k_seq_id, l.seq);
    put_uint(p, k_sequence_flags, k_seq_cleared);
    put_uint(ted, k_te_track_uuid, track);  // TrackEventDefaults.track_uuid
    put_uint(defaults, k_timestamp_clock_id, k_clock_delta);
    put_bytes(defaults, 11, ted);  // TracePacketDefaults.track_event_defaults
    put_bytes(p, k_packet_defaults, defaults);
    put_uint(clock, 1, k_clock_realtime);  // Clock.clock_id
    put_uint(clock, 2, t0);                // Clock.timestamp
    put_bytes(snap, 1, clock);             // ClockSnapshot.clocks
    clock.clear();
    put_uint(clock, 1, k_clock_delta);
    put_uint(clock, 2, t0);
    put_uint(clock, 3, 1);  // Clock.is_incremental
    put_bytes(snap, 1, clock);
    put_uint(snap, 2, k_clock_realtime);  // ClockSnapshot.primary_trace_clock
    put_bytes(p, k_clock_snapshot, snap);
    put_uint(p, k_timestamp, t0);
    put_uint(p, k_timestamp_clock_id, k_clock_realtime);
    w_.packet(p);
    return l;
  }

  /// One track event on lane `l` at absolute time `ts` (>= the lane's last).
  void event(lane& l, std::uint64_t ts, std::uint64_t type, std::uint32_t name,
             const std::string* local_name, const std::uint64_t* flow, bool terminating,
             std::string_view name_text, std::int64_t counter = 0) {
    const bool named = type == k_type_begin || type == k_type_instant;
    if (type != k_type_counter && local_name == nullptr &&
        (!named || std::binary_search(l.interned.begin(), l.interned.end(), name))) {
      fast_event(l, ts, type, name, flow, terminating);
      return;
    }
    pk_.clear();
    te_.clear();
    put_uint(pk_, k_timestamp, ts - l.last_ts);
    l.last_ts = ts;
    put_uint(pk_, k_seq_id, l.seq);
    put_uint(te_, k_te_type, type);
    if (type == k_type_begin || type == k_type_instant) {
      if (local_name != nullptr) {
        put_bytes(te_, k_te_name, *local_name);
      } else {
        put_uint(te_, k_te_name_iid, name);
        const auto at = std::lower_bound(l.interned.begin(), l.interned.end(), name);
        if (at == l.interned.end() || *at != name) {
          l.interned.insert(at, name);
          std::string en, id;
          put_uint(en, 1, name);        // EventName.iid
          put_bytes(en, 2, name_text);  // EventName.name
          put_bytes(id, 2, en);         // InternedData.event_names
          put_bytes(pk_, k_interned_data, id);
        }
      }
      if (flow != nullptr) {
        put_fixed64(te_, terminating ? k_te_terminating_flow_ids : k_te_flow_ids, *flow);
      }
    }
    if (type == k_type_counter) put_int(te_, k_te_counter_value, counter);
    put_bytes(pk_, k_track_event, te_);
    w_.packet(pk_);
  }

 private:
  // The usual event, assembled on the stack: no name to define, no counter value.
  static char* varint_at(char* p, std::uint64_t v) {
    while (v >= 0x80) {
      *p++ = static_cast<char>(v | 0x80);
      v >>= 7;
    }
    *p++ = static_cast<char>(v);
    return p;
  }
  void fast_event(lane& l, std::uint64_t ts, std::uint64_t type, std::uint32_t name,
                  const std::uint64_t* flow, bool terminating) {
    char te[32];
    char* t = te;
    *t++ = static_cast<char>(k_te_type << 3);
    t = varint_at(t, type);
    if (type != k_type_end) {
      *t++ = static_cast<char>(k_te_name_iid << 3);
      t = varint_at(t, name);
      if (flow != nullptr) {
        t = varint_at(t, ((terminating ? k_te_terminating_flow_ids : k_te_flow_ids) << 3) | 1);
        for (int i = 0; i < 8; ++i) *t++ = static_cast<char>((*flow >> (8 * i)) & 0xff);
      }
    }
    char pk[80];
    char* p = pk;
    *p++ = static_cast<char>(k_timestamp << 3);
    p = varint_at(p, ts - l.last_ts);
    l.last_ts = ts;
    *p++ = static_cast<char>(k_seq_id << 3);
    p = varint_at(p, l.seq);
    *p++ = static_cast<char>((k_track_event << 3) | 2);
    p = varint_at(p, static_cast<std::uint64_t>(t - te));
    std::memcpy(p, te, static_cast<std::size_t>(t - te));
    p += t - te;
    w_.packet(std::string_view(pk, static_cast<std::size_t>(p - pk)));
  }

  pf_writer& w_;
  std::string pk_, te_;
};

}  // namespace

std::uint64_t write_perfetto_trace(
    const trace_dir& dir, const read_options& ropt, const pf_layout& lay,
    const std::function<std::uint64_t(std::size_t, std::uint64_t)>& epoch_of, output_file& out,
    bool compress, std::uint64_t* skipped) {
  if (compress && !perfetto_compression_available()) {
    throw tool_error(exit_usage, "--compress: this lotus-tool was built without zlib");
  }
  pf_writer w(out, compress);
  trace_builder tb(w);

  // Tracks of the processes and threads, as the JSON timeline lays them out.
  std::map<std::uint64_t, std::uint64_t> process_uuid;
  for (const auto& p : lay.processes) process_uuid[p.pid] = tb.process_track(p.pid, p.name);
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::pair<std::uint64_t, std::string>> thread;
  for (const auto& t : lay.threads) {
    thread[{t.pid, t.tid}] = {tb.thread_track(t.pid, t.tid, t.name), t.name};
  }
  std::map<std::pair<std::uint64_t, std::uint64_t>, bool> thread_used;

  // Interned names (global ids, defined per sequence on first use): op names. Batch record
  // names (one per index) are written inline: interning them would cost a definition each.
  std::unordered_map<std::string_view, std::uint32_t> iid_of;
  std::deque<std::string> names(1);  // names[iid]; a deque keeps the map's keys valid
  const auto intern = [&](std::string_view n) -> std::uint32_t {
    const auto it = iid_of.find(n);
    if (it != iid_of.end()) return it->second;
    if (names.size() > k_max_interned) return 0;
    const auto id = static_cast<std::uint32_t>(names.size());
    names.emplace_back(n);
    iid_of.emplace(names.back(), id);
    return id;
  };
  const std::uint32_t marker_name = intern("out-of-order arrival");

  spill_log<counter_change> counters(std::size_t{1} << 20);
  std::uint64_t records = 0;
  std::vector<std::string> local;  // the current file's names beyond k_max_interned
  spill_log<item> items(std::size_t{4} << 20);
  std::size_t cur = SIZE_MAX;
  std::uint64_t seq = 0;

  const auto finish_file = [&](std::size_t fi) {
    if (items.empty()) return;
    const trace_file& f = dir.files[fi];
    const auto where = lay.where[fi];
    const auto th = thread.find(where);
    const std::uint64_t thread_uuid = th != thread.end() ? th->second.first : 0;
    const std::string thread_name = th != thread.end() ? th->second.second : f.name;
    std::vector<lane> lanes;
    std::string batch_text;
    std::uint64_t first_ts = 0;
    bool any = false;
    const auto new_lane = [&](std::uint64_t t0) {
      std::uint64_t track = 0;
      bool& used = thread_used[where];
      if (!used && thread_uuid != 0) {
        used = true;
        track = thread_uuid;
      } else {
        track = tb.child_track(
            thread_uuid,
            thread_name + " \u00b7 " + f.name + " \u00b7 lane " + std::to_string(lanes.size()),
            false);
      }
      lanes.push_back(tb.start(track, t0));
    };
    const auto close_until = [&](lane& l, std::uint64_t t) {
      while (!l.open.empty() && l.open.back() <= t) {
        tb.event(l, l.open.back(), k_type_end, 0, nullptr, nullptr, false, std::string());
        l.open.pop_back();
      }
    };
    const auto by_start = [](const item& a, const item& b) {
      if (a.start != b.start) return a.start < b.start;
      if (a.end != b.end) return a.end > b.end;
      return a.seq < b.seq;
    };
    const auto place = [&](const item& x) {
      if (!any) {
        any = true;
        first_ts = x.start;
      }
      lane* chosen = nullptr;
      for (auto& l : lanes) {
        close_until(l, x.start);
        if (l.open.empty() || x.end <= l.open.back()) {
          chosen = &l;
          break;
        }
      }
      if (chosen == nullptr) {
        new_lane(first_ts);
        chosen = &lanes.back();
      }
      const auto kind = static_cast<batch_kind>(x.kind & 0xff);
      std::uint64_t flow = 0;
      const bool batch = kind == batch_kind::queued || kind == batch_kind::preprocessed ||
                         kind == batch_kind::wait || kind == batch_kind::consumed;
      if (batch) flow = flow_id(f.source, x.epoch, x.idx);
      const bool local_name = (x.name & k_local_name) != 0;
      if (x.name == k_batch_name) batch_text = canonical_batch_name(kind, x.idx);
      const std::string& text = x.name == k_batch_name ? batch_text
                                : local_name           ? local[x.name & ~k_local_name]
                                                       : names[x.name];
      const bool inline_name = local_name || x.name == k_batch_name;
      tb.event(*chosen, x.start, k_type_begin, x.name, inline_name ? &text : nullptr,
               batch ? &flow : nullptr, kind == batch_kind::consumed, text);
      chosen->open.push_back(x.end);
      if (x.kind & k_marker) {
        tb.event(*chosen, x.start, k_type_instant, marker_name, nullptr, nullptr, false,
                 names[marker_name]);
      }
    };
    if (std::vector<item>* ram = items.in_ram()) {  // the usual file: sorted in place
      std::sort(ram->begin(), ram->end(), by_start);
      for (const item& x : *ram) place(x);
    } else {
      sorted_scan(items, by_start, place);
    }
    for (auto& l : lanes) close_until(l, UINT64_MAX);
    items.clear();
    local.clear();
  };

  const std::uint64_t skip = for_each_record(
      dir, ropt, [&](std::size_t fi, const record& r, const batch_ref& bt, std::uint64_t line) {
        if (fi != cur) {
          if (cur != SIZE_MAX) finish_file(cur);
          cur = fi;
        }
        ++records;
        item x{};
        x.start = r.start_ns;
        x.end = r.start_ns + r.dur_ns < r.start_ns ? UINT64_MAX : r.start_ns + r.dur_ns;
        x.idx = bt.idx;
        x.seq = seq++;
        x.kind = static_cast<std::uint32_t>(bt.kind);
        const bool batch = bt.kind == batch_kind::queued || bt.kind == batch_kind::preprocessed ||
                           bt.kind == batch_kind::wait || bt.kind == batch_kind::consumed;
        if (batch) x.epoch = epoch_of(fi, line);
        if (bt.kind == batch_kind::wait && r.dur_ns == 1000) x.kind |= k_marker;
        x.name = bt.kind == batch_kind::none ? intern(r.name) : 0;
        if (x.name == 0 && r.name == canonical_batch_name(bt.kind, bt.idx)) {
          x.name = k_batch_name;  // rebuilt from kind and index when written: no memory
        } else if (x.name == 0) {
          x.name = k_local_name | static_cast<std::uint32_t>(local.size());
          local.emplace_back(r.name);
        }
        items.push(x);
        // Counter changes of this record's trace part.
        const std::uint32_t key = dir.files[fi].source * 3;
        switch (bt.kind) {
          case batch_kind::queued:
            counters.push({r.start_ns, key + 0, +1});
            break;
          case batch_kind::preprocessed:
            counters.push({x.end, key + 0, -1});
            counters.push({x.end, key + 1, +1});
            counters.push({r.start_ns, key + 2, +1});
            counters.push({x.end, key + 2, -1});
            break;
          case batch_kind::consumed:
            counters.push({r.start_ns, key + 1, -1});
            break;
          default:
            break;
        }
      });
  if (cur != SIZE_MAX) finish_file(cur);
  if (skipped != nullptr) *skipped = skip;

  // Counter tracks: the running sums, one sequence each, one value per distinct time.
  std::optional<std::uint32_t> key;
  lane cl;
  std::int64_t value = 0;
  std::optional<std::uint64_t> pending_ts;
  const auto emit_pending = [&] {
    if (pending_ts)
      tb.event(cl, *pending_ts, k_type_counter, 0, nullptr, nullptr, false, {}, value);
    pending_ts.reset();
  };
  sorted_scan(
      counters,
      [](const counter_change& a, const counter_change& b) {
        if (a.key != b.key) return a.key < b.key;
        return a.ts < b.ts;
      },
      [&](const counter_change& c) {
        if (key != c.key) {
          emit_pending();
          key = c.key;
          value = 0;
          const std::uint32_t part = c.key / 3;
          const std::string label =
              dir.sources.size() > 1 ? dir.sources[part].label + ": " : std::string();
          cl = tb.start(tb.child_track(0, label + k_counter_names[c.key % 3], true), c.ts);
        }
        if (pending_ts && *pending_ts != c.ts) emit_pending();
        value += c.delta;
        pending_ts = c.ts;
      });
  emit_pending();
  w.finish();
  return records;
}

}  // namespace lotus_tool
