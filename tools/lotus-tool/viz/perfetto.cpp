// lotus — lotus-tool viz: Perfetto's native protobuf trace (the `.pftrace` output of viz)
// SPDX-License-Identifier: MIT
// Why one file of ~920 lines: it is one encoder of one format: the protobuf wire helpers, the
// interned names and tracks, and the builder that walks the trace once share the field numbers and
// the sequence state described below, and nothing of it is used elsewhere. Split, the parts would
// have to export the encoder's internals to each other; the `.proto` beside it is the map.
//
// Encoding (field numbers: tools/lotus-tool/viz/perfetto_trace.proto, from Perfetto's trace proto
// reference). The file is a `Trace`: a sequence of `packet` fields.
// - Sequence 1 holds the track descriptors: one per process (pid, name), per thread (pid, tid,
//   name), per extra lane of a thread (records of one file that do not nest: parent = its thread)
//   and per counter track.
// - Every other track (a lane of a file, or a trace part's counters) is written by one sequence
//   generation. Its first packet sets SEQ_INCREMENTAL_STATE_CLEARED, the packet defaults (the
//   track, clock 64) and a clock snapshot that defines clock 64 as an incremental nanosecond clock
//   equal to CLOCK_REALTIME (the trace's primary clock): the packets after it carry timestamps as
//   deltas from the previous packet of their sequence, so a generation is written in time order.
//   Event names are interned per generation (InternedData.event_names, with the first event that
//   uses them). Every such packet carries its trusted_packet_sequence_id (Perfetto ignores
//   interned data, defaults and sequence clocks without it).
// - Sequence ids are reused: once a file is written, its lanes' ids start the next file's lanes
//   as new generations, so ids stay below 128 (one byte). Perfetto rejects a clock snapshot of a
//   sequence whose trace-clock time goes back, so a generation's snapshot is 1 ns after the
//   previous generation's (not after its first event; else another id is taken).
// - A record is one slice: a SLICE_BEGIN at its start and a SLICE_END at its end, exact in ns.
//   Records of a file that do not nest (batch records of a main file) go to extra lanes. A file's
//   records stream through a window of 32k records sorted by start (an insertion sort: Lotus
//   files are in end order, nearly sorted); the memory does not grow with the file. A record that
//   starts before one already written (further out of order than the window) is written after
//   the file's others, on extra lanes.
// - Batch records carry flow ids (fixed64): SBatchQueued → SBatchPreprocessed → SBatchWait →
//   SBatchConsumed of one (trace part, epoch, index), terminating at SBatchConsumed. Their names
//   (one per index) are inline: an interned name would cost a definition each. An out-of-order
//   arrival (the 1 µs SBatchWait marker) adds an instant event "out-of-order arrival".
// - Counter tracks per trace part (a directory or rank): batches in flight (queued, not yet
//   preprocessed), batches ready (preprocessed, not yet consumed) and busy workers (inside an
//   SBatchPreprocessed span). One sequence per part writes them: a TYPE_COUNTER event on the
//   "in flight" track (counter_value, or double_counter_value when negative: 10 bytes instead of
//   12) whose extra_counter_values are the two others (the defaults' extra_counter_track_uuids),
//   one packet per time at which a value changes, ending at the last value that changed.
// - Size: a packet is framing (2 B), timestamp (1 B key + the delta), sequence id (2 B) and the
//   track event (2 B framing + 2 B type, + 2 B name_iid on a begin): a record takes at least
//   20 B + its two timestamp deltas, which op records reach. See bench/README.md.
// - Speed: packets are assembled in place in a 1 MiB block written straight to the file (or
//   zlib-compressed into one `compressed_packets` packet with --compress); no allocation per
//   record.
#include "viz/perfetto.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string_view>
#include <unordered_map>

#include "util/error.hpp"
#include "util/output.hpp"
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

std::size_t varint_len(std::uint64_t v) {
  std::size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}
char* put_varint(char* p, std::uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}
// A field key: (field << 3) | wire type, as a varint.
char* put_key(char* p, unsigned field, unsigned wire) { return put_varint(p, (field << 3) | wire); }
std::size_t key_len(unsigned field) { return varint_len(field << 3); }
char* put_fixed64(char* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) *p++ = static_cast<char>((v >> (8 * i)) & 0xff);
  return p;
}

// Messages of the sequence starts and descriptors (a few per file): assembled in strings.
void put_uint(std::string& b, unsigned field, std::uint64_t v) {
  char tmp[20];
  char* p = put_key(tmp, field, 0);
  p = put_varint(p, v);
  b.append(tmp, static_cast<std::size_t>(p - tmp));
}
void put_int(std::string& b, unsigned field, std::int64_t v) {
  put_uint(b, field, static_cast<std::uint64_t>(v));  // int32/int64: two's complement varint
}
void put_bytes(std::string& b, unsigned field, std::string_view s) {
  char tmp[20];
  char* p = put_key(tmp, field, 2);
  p = put_varint(p, s.size());
  b.append(tmp, static_cast<std::size_t>(p - tmp));
  b.append(s.data(), s.size());
}
// A protobuf `string` field: must be well-formed UTF-8 (protoc and Perfetto reject the trace
// otherwise), whatever bytes a name holds.
void put_string(std::string& b, unsigned field, std::string_view s) {
  if (is_valid_utf8(s)) {
    put_bytes(b, field, s);
  } else {
    put_bytes(b, field, valid_utf8(s));
  }
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
  // TrackEvent (and TrackEventDefaults: track_uuid, extra_counter_track_uuids)
  k_te_type = 9,
  k_te_name_iid = 10,
  k_te_track_uuid = 11,
  k_te_extra_counter_values = 12,
  k_te_name = 23,
  k_te_counter_value = 30,
  k_te_extra_counter_track_uuids = 31,
  k_te_double_counter_value = 44,
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
constexpr unsigned k_type_begin = 1, k_type_end = 2, k_type_instant = 3, k_type_counter = 4;
constexpr std::uint64_t k_seq_cleared = 1;     // SEQ_INCREMENTAL_STATE_CLEARED
constexpr std::uint64_t k_clock_realtime = 1;  // BUILTIN_CLOCK_REALTIME
constexpr std::uint64_t k_clock_delta = 64;    // a sequence-scoped clock of ours

// A name of the trace: an interned id (iid >= 1), or for names beyond k_max_interned an index
// into the current file's own list (high bit set).
constexpr std::uint32_t k_local_name = 0x80000000u;
constexpr std::size_t k_max_interned = std::size_t{1} << 16;
constexpr std::uint32_t k_batch_name = k_local_name - 1;  // SBatch<Kind>_<idx> as written

bool is_batch(batch_kind k) { return batch_kind_of(k) != nullptr; }

// One record as the writer keeps it until its file is done (40 bytes).
struct item {
  std::uint64_t start, end, idx;
  std::uint64_t flow;  // 0: none
  std::uint32_t name;
  std::uint32_t kind;  // batch_kind, and bit 8: an out-of-order arrival marker
};
constexpr std::uint32_t k_marker = 0x100;
bool by_start(const item& a, const item& b) {
  if (a.start != b.start) return a.start < b.start;
  return a.end > b.end;  // the enclosing slice first
}

// Sorts a file's records by start. Lotus writes a record when it ends, so a file is in end
// order: nearly in start order, each enclosing record a few places after its children. An
// insertion sort handles that in linear time; it gives up for std::sort past 8 moves per item.
void sort_by_start(std::vector<item>& v) {
  const std::size_t n = v.size();
  std::size_t budget = 8 * n + 64;
  for (std::size_t i = 1; i < n; ++i) {
    if (!by_start(v[i], v[i - 1])) continue;
    const item x = v[i];
    std::size_t j = i;
    while (j > 0 && by_start(x, v[j - 1])) {
      v[j] = v[j - 1];
      --j;
      if (--budget == 0) break;
    }
    v[j] = x;
    if (budget == 0) {
      std::sort(v.begin(), v.end(), by_start);
      return;
    }
  }
}

// A change of a trace part's counters at one time: batches in flight, ready, busy workers.
struct counter_change {
  std::uint64_t ts;
  std::uint32_t part;
  std::int8_t delta[3];
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

// The packets go straight into a block of about 1 MiB, written out (or zlib-compressed into one
// `compressed_packets` packet) when full.
class pf_writer {
 public:
  pf_writer(output_file& out, bool compress)
      : out_(out), compress_(compress), cap_(k_block + k_slack), buf_(new char[cap_]) {}

  /// Room for `n` more bytes; write them, then call commit() with the end.
  char* room(std::size_t n) {
    if (used_ + n > cap_) {
      flush_block();
      if (n > cap_) {
        buf_.reset(new char[n]);
        cap_ = n;
      }
    }
    return buf_.get() + used_;
  }
  void commit(const char* end) {
    used_ = static_cast<std::size_t>(end - buf_.get());
    if (used_ >= k_block) flush_block();
  }
  /// One packet whose body is `body`.
  void packet(std::string_view body) {
    char* p = room(body.size() + 11);
    *p++ = static_cast<char>((k_trace_packet << 3) | 2);
    p = put_varint(p, body.size());
    std::memcpy(p, body.data(), body.size());
    commit(p + body.size());
  }
  void finish() { flush_block(); }

  std::uint64_t new_uuid() { return next_uuid_++; }

 private:
  static constexpr std::size_t k_block = std::size_t{1} << 20;
  static constexpr std::size_t k_slack = std::size_t{64} << 10;

  void flush_block() {
    if (used_ == 0) return;
    if (!compress_) {
      out_.write_through(std::string_view(buf_.get(), used_));
      used_ = 0;
      return;
    }
#ifdef LOTUS_TOOL_ZLIB
    uLongf n = compressBound(static_cast<uLong>(used_));
    z_.resize(n + 24);
    char* head = &z_[0];
    // compressed_packets after room for the packet's key and lengths (written once known).
    if (compress2(reinterpret_cast<Bytef*>(head + 24), &n,
                  reinterpret_cast<const Bytef*>(buf_.get()), static_cast<uLong>(used_),
                  6) != Z_OK) {
      throw tool_error(exit_io, "zlib: compression failed");
    }
    const std::size_t body = key_len(k_compressed_packets) + varint_len(n) + n;
    char tmp[24];
    char* p = tmp;
    *p++ = static_cast<char>((k_trace_packet << 3) | 2);
    p = put_varint(p, body);
    p = put_key(p, k_compressed_packets, 2);
    p = put_varint(p, n);
    const std::size_t h = static_cast<std::size_t>(p - tmp);
    std::memcpy(head + 24 - h, tmp, h);
    out_.write_through(std::string_view(head + 24 - h, h + n));
#endif
    used_ = 0;
  }

  output_file& out_;
  bool compress_;
  std::size_t cap_, used_ = 0;
  std::unique_ptr<char[]> buf_;
  std::string z_;
  std::uint64_t next_uuid_ = 1;
};

// Sequence ids 2.. (1: the descriptors), reused once their lanes are done: a reused id starts a
// new generation (incremental state cleared, new defaults, a new clock snapshot). Perfetto keeps
// the snapshots of one sequence's clocks in order and rejects one whose CLOCK_REALTIME (the
// trace clock) goes back, so a generation's clock starts 1 ns after the previous generation's
// (and never after the lane's first event); an id whose last start is too late is not reused.
class sequence_pool {
 public:
  struct grant {
    std::uint32_t id;
    std::uint64_t t0;  // the clock snapshot's time, <= the first event
  };
  grant acquire(std::uint64_t first_ts) {
    earliest_ = std::min(earliest_, first_ts);
    std::size_t best = free_.size();
    for (std::size_t i = 0; i < free_.size(); ++i) {
      if (free_[i].t0 < first_ts && (best == free_.size() || free_[i].id < free_[best].id)) {
        best = i;
      }
    }
    if (best != free_.size()) {
      grant g{free_[best].id, free_[best].t0 + 1};
      free_[best] = free_.back();
      free_.pop_back();
      return g;
    }
    // A new id: its clock starts at the earliest first event seen so far, which leaves room for
    // the generations after it.
    return {next_++, earliest_};
  }
  void release(std::uint32_t id, std::uint64_t t0) { free_.push_back({id, t0}); }

 private:
  std::vector<grant> free_;
  std::uint32_t next_ = 2;
  std::uint64_t earliest_ = UINT64_MAX;
};

// One track written by one sequence (generation), in time order.
struct lane {
  std::uint32_t seq = 0;
  std::uint64_t uuid = 0;
  std::uint64_t t0 = 0;
  std::uint64_t last_ts = 0;
  std::vector<std::uint64_t> open;      // end times of the open slices, innermost last
  std::vector<std::uint64_t> interned;  // bit set of the iids this generation has defined
  bool defined(std::uint32_t iid) const {
    return iid / 64 < interned.size() && ((interned[iid / 64] >> (iid % 64)) & 1) != 0;
  }
  void define(std::uint32_t iid) {
    if (iid / 64 >= interned.size()) interned.resize(iid / 64 + 1);
    interned[iid / 64] |= std::uint64_t{1} << (iid % 64);
  }
};

class trace_builder {
 public:
  explicit trace_builder(pf_writer& w) : w_(w) {}

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
    put_string(pd, 6, name);                         // ProcessDescriptor.process_name
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
    put_string(th, 5, name);                         // ThreadDescriptor.thread_name
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
    put_string(td, k_td_name, name);
    if (counter) {
      std::string cd;
      put_string(cd, 6, "count");  // CounterDescriptor.unit_name
      put_bytes(td, k_td_counter, cd);
    }
    descriptor(td);
    return uuid;
  }

  /// A sequence generation for `track` whose first event is at `first_ts` (absolute ns); with
  /// `extra`, its events carry values of those counter tracks too (extra_counter_values).
  lane start(std::uint64_t track, std::uint64_t first_ts, const std::uint64_t* extra = nullptr,
             std::size_t n_extra = 0) {
    const sequence_pool::grant g = seqs_.acquire(first_ts);
    lane l;
    l.seq = g.id;
    l.uuid = track;
    l.t0 = g.t0;
    l.last_ts = g.t0;
    std::string p, defaults, ted, snap, clock;
    put_uint(p, k_seq_id, l.seq);
    put_uint(p, k_sequence_flags, k_seq_cleared);
    put_uint(ted, k_te_track_uuid, track);  // TrackEventDefaults.track_uuid
    for (std::size_t i = 0; i < n_extra; ++i) {
      put_uint(ted, k_te_extra_counter_track_uuids, extra[i]);
    }
    put_uint(defaults, k_timestamp_clock_id, k_clock_delta);
    put_bytes(defaults, 11, ted);  // TracePacketDefaults.track_event_defaults
    put_bytes(p, k_packet_defaults, defaults);
    put_uint(clock, 1, k_clock_realtime);  // Clock.clock_id
    put_uint(clock, 2, g.t0);              // Clock.timestamp
    put_bytes(snap, 1, clock);             // ClockSnapshot.clocks
    clock.clear();
    put_uint(clock, 1, k_clock_delta);
    put_uint(clock, 2, g.t0);
    put_uint(clock, 3, 1);  // Clock.is_incremental
    put_bytes(snap, 1, clock);
    put_uint(snap, 2, k_clock_realtime);  // ClockSnapshot.primary_trace_clock
    put_bytes(p, k_clock_snapshot, snap);
    put_uint(p, k_timestamp, g.t0);
    put_uint(p, k_timestamp_clock_id, k_clock_realtime);
    w_.packet(p);
    return l;
  }
  /// The lane's sequence id is free for another generation.
  void done(const lane& l) { seqs_.release(l.seq, l.t0); }

  /// One slice or instant event on lane `l` at absolute time `ts` (>= the lane's last): a name
  /// by iid (defined in this packet when `text` is given and the lane has not defined it) or
  /// inline (`iid` 0), a flow id (0: none).
  void event(lane& l, std::uint64_t ts, unsigned type, std::uint32_t iid, std::string_view text,
             std::uint64_t flow, bool terminating) {
    const std::uint64_t delta = ts - l.last_ts;
    l.last_ts = ts;
    const bool named = type != k_type_end;
    const bool define = named && iid != 0 && !l.defined(iid);
    std::string fixed;  // a name that is not UTF-8, made valid (protobuf string fields)
    if ((define || (named && iid == 0)) && !is_valid_utf8(text)) {
      fixed = valid_utf8(text);
      text = fixed;
    }
    std::size_t te = 2;  // type: key and value (< 128)
    if (named) {
      te += iid != 0 ? 1 + varint_len(iid) : 2 + varint_len(text.size()) + text.size();
    }
    if (flow != 0) te += 2 + 8;
    std::size_t en = 0, idata = 0;
    if (define) {
      l.define(iid);
      en = 1 + varint_len(iid) + 1 + varint_len(text.size()) + text.size();  // EventName
      idata = 1 + varint_len(en) + en;  // InternedData.event_names
    }
    const std::size_t body = 1 + varint_len(delta) + 1 + varint_len(l.seq) +
                             (define ? 1 + varint_len(idata) + idata : 0) + 1 + varint_len(te) + te;
    char* p = w_.room(1 + varint_len(body) + body);
    *p++ = static_cast<char>((k_trace_packet << 3) | 2);
    p = put_varint(p, body);
    *p++ = static_cast<char>(k_timestamp << 3);
    p = put_varint(p, delta);
    *p++ = static_cast<char>(k_seq_id << 3);
    p = put_varint(p, l.seq);
    if (define) {
      p = put_key(p, k_interned_data, 2);
      p = put_varint(p, idata);
      p = put_key(p, 2, 2);  // InternedData.event_names
      p = put_varint(p, en);
      p = put_key(p, 1, 0);  // EventName.iid
      p = put_varint(p, iid);
      p = put_key(p, 2, 2);  // EventName.name
      p = put_varint(p, text.size());
      std::memcpy(p, text.data(), text.size());
      p += text.size();
    }
    p = put_key(p, k_track_event, 2);
    p = put_varint(p, te);
    *p++ = static_cast<char>(k_te_type << 3);
    *p++ = static_cast<char>(type);
    if (named && iid != 0) {
      *p++ = static_cast<char>(k_te_name_iid << 3);
      p = put_varint(p, iid);
    } else if (named) {
      p = put_key(p, k_te_name, 2);
      p = put_varint(p, text.size());
      std::memcpy(p, text.data(), text.size());
      p += text.size();
    }
    if (flow != 0) {
      p = put_key(p, terminating ? k_te_terminating_flow_ids : k_te_flow_ids, 1);
      p = put_fixed64(p, flow);
    }
    w_.commit(p);
  }

  /// A counter sample at `ts` on lane `l`: v[0] for the lane's track (int64, or a double when
  /// negative: 10 bytes instead of 12), v[1..] for its extra counter tracks.
  void counters(lane& l, std::uint64_t ts, const std::int64_t* v, std::size_t n) {
    const std::uint64_t delta = ts - l.last_ts;
    l.last_ts = ts;
    std::size_t te = 2 + (v[0] >= 0 ? 2 + varint_len(static_cast<std::uint64_t>(v[0])) : 2 + 8);
    for (std::size_t i = 1; i < n; ++i) te += 1 + varint_len(static_cast<std::uint64_t>(v[i]));
    const std::size_t body =
        1 + varint_len(delta) + 1 + varint_len(l.seq) + 1 + varint_len(te) + te;
    char* p = w_.room(1 + varint_len(body) + body);
    *p++ = static_cast<char>((k_trace_packet << 3) | 2);
    p = put_varint(p, body);
    *p++ = static_cast<char>(k_timestamp << 3);
    p = put_varint(p, delta);
    *p++ = static_cast<char>(k_seq_id << 3);
    p = put_varint(p, l.seq);
    p = put_key(p, k_track_event, 2);
    p = put_varint(p, te);
    *p++ = static_cast<char>(k_te_type << 3);
    *p++ = static_cast<char>(k_type_counter);
    if (v[0] >= 0) {
      p = put_key(p, k_te_counter_value, 0);
      p = put_varint(p, static_cast<std::uint64_t>(v[0]));
    } else {
      const double d = static_cast<double>(v[0]);
      std::uint64_t bits = 0;
      std::memcpy(&bits, &d, sizeof bits);
      p = put_key(p, k_te_double_counter_value, 1);
      p = put_fixed64(p, bits);
    }
    for (std::size_t i = 1; i < n; ++i) {
      p = put_key(p, k_te_extra_counter_values, 0);
      p = put_varint(p, static_cast<std::uint64_t>(v[i]));
    }
    w_.commit(p);
  }

 private:
  pf_writer& w_;
  sequence_pool seqs_;
};

// Tracks of the processes and threads, as the JSON timeline lays them out.
struct thread_tracks {
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::pair<std::uint64_t, std::string>> thread;
  std::map<std::pair<std::uint64_t, std::uint64_t>, bool> used;

  thread_tracks(trace_builder& tb, const pf_layout& lay) {
    for (const auto& p : lay.processes) tb.process_track(p.pid, p.name);
    for (const auto& t : lay.threads) {
      thread[{t.pid, t.tid}] = {tb.thread_track(t.pid, t.tid, t.name), t.name};
    }
  }
};

// Interned names (global ids, defined per sequence generation on first use): op names. Batch
// record names (one per index) are written inline: interning them would cost a definition
// each.
class name_table {
 public:
  std::uint32_t intern(std::string_view n) {
    const auto it = iid_of_.find(n);
    if (it != iid_of_.end()) return it->second;
    if (names_.size() > k_max_interned) return 0;
    const auto id = static_cast<std::uint32_t>(names_.size());
    names_.emplace_back(n);
    iid_of_.emplace(names_.back(), id);
    return id;
  }
  // A direct-mapped cache of recent op names and their iids (a file cycles through a few names):
  // most records skip the hash map.
  std::uint32_t cached_intern(std::string_view n) {
    const std::size_t k = n.size();
    const unsigned char* b = reinterpret_cast<const unsigned char*>(n.data());
    const std::size_t slot =
        k == 0 ? 0 : (k * 7 + b[k - 1] * 3 + b[k / 2] + b[k - 2 < k ? k - 2 : 0]) & 63;
    cached_name& c = cache_[slot];
    if (c.iid != 0 && c.name == n) return c.iid;
    const std::uint32_t id = intern(n);
    if (id != 0) {
      c.name.assign(n.data(), n.size());
      c.iid = id;
    }
    return id;
  }
  std::string_view operator[](std::uint32_t iid) const { return names_[iid]; }

 private:
  struct cached_name {
    std::string name;
    std::uint32_t iid = 0;
  };
  std::unordered_map<std::string_view, std::uint32_t> iid_of_;
  std::deque<std::string> names_ = std::deque<std::string>(1);  // names_[iid]; a deque keeps
                                                                // the map's keys valid
  std::vector<cached_name> cache_ = std::vector<cached_name>(64);
};

// A file's records stream through a window (k_window records, 1.25 MiB): sorted by start when
// full, all but the last k_hold are written; the rest wait for the records after them. Lotus
// files are in end order, so a record comes at most a batch's records after those it encloses.
// A record that starts before one already written (beyond the window) is "late": late records
// are kept in a spill log and written after the file's others, on lanes of their own.
class file_slices {
 public:
  file_slices(trace_builder& tb, const trace_dir& dir, const pf_layout& lay, thread_tracks& tracks,
              const name_table& names, std::uint32_t marker_name)
      : tb_(tb), dir_(dir), lay_(lay), tracks_(tracks), names_(names), marker_name_(marker_name) {
    win_.reserve(k_window);
  }

  /// The current file's names beyond k_max_interned (item::name k_local_name | index).
  std::vector<std::string> local;

  void begin_file(std::size_t fi) {
    file_ = fi;
    where_ = lay_.where[fi];
    const auto th = tracks_.thread.find(where_);
    thread_uuid_ = th != tracks_.thread.end() ? th->second.first : 0;
    thread_name_ = th != tracks_.thread.end() ? &th->second.second : &dir_.files[fi].name;
    lane_no_ = 0;
    placed_any_ = false;
  }
  void add(const item& x) {
    if (placed_any_ && by_start(x, last_placed_)) {
      late_.push(x);
      return;
    }
    win_.push_back(x);
    if (win_.size() == k_window) drain(k_window - k_hold);
  }
  void finish_file() {
    drain(win_.size());
    close_lanes();
    if (!late_.empty()) {
      const auto place = [this](const item& x) { this->place(x); };
      if (std::vector<item>* ram = late_.in_ram()) {
        std::sort(ram->begin(), ram->end(), by_start);
        for (const item& x : *ram) place(x);
      } else {
        sorted_scan(late_, by_start, place);
      }
      close_lanes();
      late_.clear();
    }
    local.clear();
  }

 private:
  static constexpr std::size_t k_window = std::size_t{1} << 15, k_hold = std::size_t{1} << 13;

  void new_lane(std::uint64_t t0) {
    std::uint64_t track = 0;
    bool& used = tracks_.used[where_];
    if (!used && thread_uuid_ != 0) {
      used = true;
      track = thread_uuid_;
    } else {
      track = tb_.child_track(thread_uuid_,
                              *thread_name_ + " \u00b7 " + dir_.files[file_].name +
                                  " \u00b7 lane " + std::to_string(lane_no_),
                              false);
    }
    ++lane_no_;
    lanes_.push_back(tb_.start(track, t0));
  }
  void close_until(lane& l, std::uint64_t t) {
    while (!l.open.empty() && l.open.back() <= t) {
      tb_.event(l, l.open.back(), k_type_end, 0, {}, 0, false);
      l.open.pop_back();
    }
  }
  // Records in start order: each on the first lane where it nests (or a new one).
  void place(const item& x) {
    if (!any_) {
      any_ = true;
      first_ts_ = x.start;
    }
    lane* chosen = nullptr;
    for (auto& l : lanes_) {
      close_until(l, x.start);
      if (l.open.empty() || x.end <= l.open.back()) {
        chosen = &l;
        break;
      }
    }
    if (chosen == nullptr) {
      new_lane(first_ts_);
      chosen = &lanes_.back();
    }
    const auto kind = static_cast<batch_kind>(x.kind & 0xff);
    std::string_view text;
    std::uint32_t iid = 0;
    if (x.name == k_batch_name) {
      text = batch_record_name(batch_text_, kind, x.idx);
    } else if ((x.name & k_local_name) != 0) {
      text = local[x.name & ~k_local_name];
    } else {
      iid = x.name;
      text = names_[iid];
    }
    tb_.event(*chosen, x.start, k_type_begin, iid, text, x.flow, kind == batch_kind::consumed);
    chosen->open.push_back(x.end);
    if (x.kind & k_marker) {
      tb_.event(*chosen, x.start, k_type_instant, marker_name_, names_[marker_name_], 0, false);
    }
  }
  void close_lanes() {
    for (auto& l : lanes_) {
      close_until(l, UINT64_MAX);
      tb_.done(l);
    }
    lanes_.clear();
    any_ = false;
  }
  // Writes the first n records of the window (sorted first).
  void drain(std::size_t n) {
    sort_by_start(win_);
    for (std::size_t i = 0; i < n; ++i) place(win_[i]);
    if (n != 0) {
      placed_any_ = true;
      last_placed_ = win_[n - 1];
    }
    win_.erase(win_.begin(), win_.begin() + static_cast<std::ptrdiff_t>(n));
  }

  trace_builder& tb_;
  const trace_dir& dir_;
  const pf_layout& lay_;
  thread_tracks& tracks_;
  const name_table& names_;
  const std::uint32_t marker_name_;
  std::vector<item> win_;
  spill_log<item> late_{std::size_t{1} << 20};
  bool placed_any_ = false;
  item last_placed_{};
  std::vector<lane> lanes_;
  std::size_t file_ = 0;
  std::size_t lane_no_ = 0;  // lanes of the file so far (names of the extra lanes)
  char batch_text_[k_batch_name_max];
  // The current file's thread row.
  std::pair<std::uint64_t, std::uint64_t> where_{};
  std::uint64_t thread_uuid_ = 0;
  const std::string* thread_name_ = nullptr;
  std::uint64_t first_ts_ = 0;
  bool any_ = false;
};

// Counter tracks: per trace part, one sequence on its "in flight" track that carries the two
// others as extra counter values; one sample of all three per distinct time where one changed.
void write_counters(trace_builder& tb, const trace_dir& dir, spill_log<counter_change>& counters) {
  bool have_part = false;
  std::uint32_t part = 0;
  lane cl;
  std::int64_t value[3] = {0, 0, 0}, shown[3] = {0, 0, 0};
  std::optional<std::uint64_t> pending_ts;
  bool first_sample = true;
  const auto emit_pending = [&] {
    if (pending_ts && (value[0] != shown[0] || value[1] != shown[1] || value[2] != shown[2])) {
      // The part's first sample has all three values; later ones end at the last that changed.
      std::size_t n = 3;
      while (!first_sample && n > 1 && value[n - 1] == shown[n - 1]) --n;
      tb.counters(cl, *pending_ts, value, n);
      std::copy(value, value + n, shown);
      first_sample = false;
    }
    pending_ts.reset();
  };
  const auto on_change = [&](const counter_change& c) {
    if (!have_part || part != c.part) {
      emit_pending();
      if (have_part) tb.done(cl);
      have_part = true;
      part = c.part;
      std::fill(value, value + 3, 0);
      std::fill(shown, shown + 3, 0);
      first_sample = true;
      const std::string label =
          dir.sources.size() > 1 ? dir.sources[part].label + ": " : std::string();
      std::uint64_t uuid[3];
      for (int k = 0; k < 3; ++k) uuid[k] = tb.child_track(0, label + k_counter_names[k], true);
      cl = tb.start(uuid[0], c.ts, uuid + 1, 2);
    }
    if (pending_ts && *pending_ts != c.ts) emit_pending();
    for (int k = 0; k < 3; ++k) value[k] += c.delta[k];
    pending_ts = c.ts;
  };
  const auto by_part_time = [](const counter_change& a, const counter_change& b) {
    if (a.part != b.part) return a.part < b.part;
    return a.ts < b.ts;
  };
  if (std::vector<counter_change>* ram = counters.in_ram()) {
    std::sort(ram->begin(), ram->end(), by_part_time);
    for (const auto& c : *ram) on_change(c);
  } else {
    sorted_scan(counters, by_part_time, on_change);
  }
  emit_pending();
}

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
  thread_tracks tracks(tb, lay);
  name_table names;
  const std::uint32_t marker_name = names.intern("out-of-order arrival");
  file_slices slices(tb, dir, lay, tracks, names, marker_name);

  // Counter changes: at most 4 per batch (the 1M-record bench trace needs about 2 MiB).
  spill_log<counter_change> counters(std::size_t{4} << 20);
  counters.reserve();
  std::uint64_t records = 0;
  std::size_t cur = SIZE_MAX;
  char batch_text[k_batch_name_max];
  const std::uint64_t skip = for_each_record(
      dir, ropt, [&](std::size_t fi, const record& r, const batch_ref& bt, std::uint64_t line) {
        if (fi != cur) {
          if (cur != SIZE_MAX) slices.finish_file();
          cur = fi;
          slices.begin_file(fi);
        }
        ++records;
        item x{};
        x.start = r.start_ns;
        x.end = r.start_ns + r.dur_ns < r.start_ns ? UINT64_MAX : r.start_ns + r.dur_ns;
        x.idx = bt.idx;
        x.kind = static_cast<std::uint32_t>(bt.kind);
        const bool batch = is_batch(bt.kind);
        const std::uint32_t part = dir.files[fi].source;
        if (batch) x.flow = flow_id(part, epoch_of(fi, line), bt.idx);
        if (bt.kind == batch_kind::wait && r.dur_ns == 1000) x.kind |= k_marker;
        if (bt.kind == batch_kind::none) x.name = names.cached_intern(r.name);
        if (x.name == 0 && r.name == batch_record_name(batch_text, bt.kind, bt.idx)) {
          x.name = k_batch_name;  // rebuilt from kind and index when written: no memory
        } else if (x.name == 0) {
          x.name = k_local_name | static_cast<std::uint32_t>(slices.local.size());
          slices.local.emplace_back(r.name);
        }
        slices.add(x);
        // Counter changes of this record's trace part.
        switch (bt.kind) {
          case batch_kind::queued:
            counters.push({r.start_ns, part, {+1, 0, 0}});
            break;
          case batch_kind::preprocessed:
            counters.push({r.start_ns, part, {0, 0, +1}});
            counters.push({x.end, part, {-1, +1, -1}});
            break;
          case batch_kind::consumed:
            counters.push({r.start_ns, part, {0, -1, 0}});
            break;
          default:
            break;
        }
      });
  if (cur != SIZE_MAX) slices.finish_file();
  if (skipped != nullptr) *skipped = skip;
  write_counters(tb, dir, counters);
  w.finish();
  return records;
}

}  // namespace lotus_tool
