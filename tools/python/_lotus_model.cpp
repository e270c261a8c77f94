// lotus — lotus._lotus's DataLoader model: lotus-tool's (model/epoch_model.hpp), for autotune
// SPDX-License-Identifier: MIT
// lotus.autotune replays each epoch through the same code as lotus-tool whatif and tune: this
// binding and tools/lotus-tool/model/epoch_model.cpp are compiled into the module (the model
// depends on the standard library alone; nothing else of the tool comes along).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "model/epoch_model.hpp"
#include "model/memory_model.hpp"

namespace py = pybind11;

namespace lotus_python {

namespace {

using outcome = std::tuple<double, double, double, double, double, std::uint64_t>;

outcome simulate(const std::vector<std::pair<double, double>>& batches, unsigned workers,
                 unsigned prefetch_factor, double cores, double step_cpu_s, double step_off_s,
                 bool unordered, const std::vector<double>& worker_begin_s, double foreign,
                 double handoff_s, double side_cpu_s, double step_threads) {
  lotus_tool::epoch_inputs in;
  in.cpu_s.reserve(batches.size());
  in.off_s.reserve(batches.size());
  for (const auto& b : batches) {
    in.cpu_s.push_back(b.first);
    in.off_s.push_back(b.second);
  }
  in.workers = workers;
  in.prefetch_factor = prefetch_factor;
  in.cores = cores;
  in.step_cpu_s = step_cpu_s;
  in.step_off_s = step_off_s;
  in.unordered = unordered;
  in.worker_begin_s = worker_begin_s;
  in.foreign = foreign;
  in.handoff_s = handoff_s;
  in.side_cpu_s = side_cpu_s;
  in.step_threads = step_threads;
  lotus_tool::epoch_outcome o;
  {
    py::gil_scoped_release unlocked;  // the pin-memory thread and others run meanwhile
    o = lotus_tool::simulate_epoch(in);
  }
  if (!o.converged) {
    throw std::runtime_error("the DataLoader model did not converge (" +
                             std::to_string(batches.size()) + " batches)");
  }
  return {o.seconds, o.last_take, o.wait_s, o.runq_workers_s, o.runq_main_s, o.out_of_order};
}

using memory_outcome = std::tuple<double, double, double, double>;

// lotus-tool's memory model (model/memory_model.hpp) for `workers` and `prefetch_factor`.
memory_outcome predict_memory(double shared_bytes, double worker_private_bytes,
                              double worker_start_private_bytes, double growth_per_batch_bytes,
                              double batches_per_worker, unsigned measured_workers,
                              double batch_bytes, double batches_held, bool scale_growth_up,
                              unsigned workers, unsigned prefetch_factor) {
  lotus_tool::memory_inputs in;
  in.shared_bytes = shared_bytes;
  in.worker_private_bytes = worker_private_bytes;
  in.worker_start_private_bytes = worker_start_private_bytes;
  in.growth_per_batch_bytes = growth_per_batch_bytes;
  in.batches_per_worker = batches_per_worker;
  in.measured_workers = measured_workers;
  in.batch_bytes = batch_bytes;
  in.batches_held = batches_held;
  in.scale_growth_up = scale_growth_up;
  const lotus_tool::memory_estimate e =
      lotus_tool::predict_tree_memory(in, workers, prefetch_factor);
  return {e.peak_bytes, e.shared_bytes, e.per_worker_bytes, e.prefetch_bytes};
}

}  // namespace

void add_model(py::module_& m) {
  m.def("_simulate_epoch", &simulate, py::arg("batches"), py::arg("workers"),
        py::arg("prefetch_factor"), py::arg("cores"), py::arg("step_cpu_s"), py::arg("step_off_s"),
        py::arg("unordered"), py::arg("worker_begin_s"), py::arg("foreign"), py::arg("handoff_s"),
        py::arg("side_cpu_s") = 0.0, py::arg("step_threads") = 1.0,
        "_simulate_epoch(batches, workers, prefetch_factor, cores, step_cpu_s, step_off_s, "
        "unordered, worker_begin_s, foreign, handoff_s, side_cpu_s=0, step_threads=1): one epoch "
        "of lotus-tool whatif's DataLoader model (model/epoch_model.hpp); batches: (cpu_s, off_s) "
        "per batch; side_cpu_s: a batch's CPU on its worker's feeder thread; step_threads: the "
        "threads the step's CPU part keeps busy. Returns "
        "(seconds, last_take, wait_s, runq_workers_s, runq_main_s, out_of_order).");
  m.def("_predict_memory", &predict_memory, py::arg("shared_bytes"),
        py::arg("worker_private_bytes"), py::arg("worker_start_private_bytes"),
        py::arg("growth_per_batch_bytes"), py::arg("batches_per_worker"),
        py::arg("measured_workers"), py::arg("batch_bytes"), py::arg("batches_held"),
        py::arg("scale_growth_up"), py::arg("workers"), py::arg("prefetch_factor"),
        "_predict_memory(...): lotus-tool's memory model of the process tree "
        "(model/memory_model.hpp): the summed Pss with `workers` workers and `prefetch_factor`. "
        "Returns (peak_bytes, shared_bytes, per_worker_bytes, prefetch_bytes).");
}

}  // namespace lotus_python
