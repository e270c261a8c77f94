# SPDX-License-Identifier: MIT
"""lotus.torch.autotune: a DataLoader that tunes its own num_workers and prefetch_factor.

    tuned = lotus.torch.autotune(loader, memory_budget="6G")
    for epoch in range(10):
        for batch in tuned:          # each epoch; len(tuned) == len(loader)
            step(batch)
    tuned.decisions                  # one dict per epoch boundary, checked against what happened

At each epoch boundary it reads what the epoch just measured, in memory (no trace files): each
batch's time in its worker split into CPU time (the worker thread's own, time.thread_time) and time
off the CPU that was not run-queue wait (sleeping, I/O: /proc/thread-self/schedstat's 2nd field is
taken out), the consumer's step between two batches split the same way, each worker's memory
(proportional set size: a page shared after fork counts once in the job's sum), the main
process's, and the time a worker takes to start. It then replays the epoch through
the model below for every setting (workers 1..max_workers × prefetch_factor 1, 2, 4), drops those
predicted above the memory budget, and starts the next epoch with the cheapest setting predicted
within `tolerance` of the best and within a tenth of the best's predicted gain over the current
setting (fewest workers, then prefetch_factor 2, 4, 1), never one predicted slower than the
current setting (but for a tie at the cores measured for one epoch: CPU-bound batches, workers
not persistent, N + 1 workers predicted alike, at most 5 % slower with its start-ups), and none
predicted to gain less than 1 %.

Memory (model.predict_memory): lotus-tool whatif's memory model (tools/lotus-tool/model/
memory_model.hpp), the tree's summed Pss: the pages shared after fork once, each worker's private
memory with its growth per batch, and the batches in flight; its inputs measured each epoch from
/proc/self/smaps_rollup of every process (measure.py, _TreeMemory). A setting fits with the
shared part's largest epoch-to-epoch change to spare; every refusal names its predicted figure.

The model (`simulate_epoch`, model.py) is lotus-tool whatif's own code
(tools/lotus-tool/model/epoch_model.cpp, compiled into lotus._lotus): N workers with their own
index queues fed round-robin, prefetch_factor × N batches outstanding and one more sent each time
the consumer takes a batch, in-order delivery, and processor sharing of C cores (k threads wanting
a core at once each run at min(1, C / k)). autotune measures what lotus-tool takes from a trace
or an option: each batch's off-CPU part (it takes its time whatever the cores) and the consumer's
CPU part of its step, which shares the cores with the workers: on a machine where loader and
training share cores, every busy worker slows the training step. tools/docs/WHATIF.md §5 says
which inputs differ; the model is one.

The package: model.py (the native model, the memory prediction), measure.py (what an epoch
measured, inside the workers and the consumer), tuner.py (the decision rule, Tuner), loader.py
(the tuned DataLoaders and autotune()).

Warm-up: the first epoch, and the first after persistent workers restarted, pay
worker start-up, a first batch's imports and cold caches, and in a GPU job cuDNN's autotuning in
the first steps. Such an epoch is not steady state: the first quarter of its batches and steps is
left out of the model's inputs, it sets no calibration, its miss is not the model's, and it does
not judge the last change (the next epoch does).

Learning from its errors: a decision whose epoch ran more than 10 % slower than predicted (the model
was optimistic) raises the caution by one; any other lowers it by one (a move that gained more than
predicted is no reason to move less). With caution c > 0 the next move goes at most 1/2**c of the
way (in workers) from the current setting to the model's choice, and is taken only when its
predicted gain exceeds the last miss; a predicted gain of at least 30 % and over 3 times the last
miss is taken in one move. After a change, the new setting's steady epochs are compared with the
previous setting's against the epoch-to-epoch noise (the largest difference measured between two
steady epochs at an unchanged setting, at least 2 %; 20 % before any is measured): a gain of 2 %
or more goes on; a loss beyond the noise goes back to the previous setting and settles; one epoch
within the noise is not evidence, so the setting runs one more epoch; two or more within it
settle where it is. The line says "gained 12 %" or "lost 15 %". Other processes' load fitted
from the run-queue wait (below) is said in the line, and an epoch whose load differs from the one
before it by a quarter of the cores (at least one thread) neither judges the last change nor
counts as a miss. With pin_memory=True and CPU-bound batches, the workers are at most the cores
less one (at the grid's counts), the pin-memory thread's core, which the model does not run. With
persistent workers every change restarts them (a new prefetch_factor too): a change is made only
when its predicted gain repays the restart within PAYBACK_EPOCHS (5) epochs.

What the training loop receives is the plain loader's (tests/python/
test_autotune_equivalence.py runs each case both ways): every tuned DataLoader is built over the
loader's own dataset, sampler, batch_sampler, collate_fn, worker_init_fn and generator. The same
samples come in the same order every epoch: the sampler is asked for iter() as often as the plain
loader asks (_Indices), and with persistent workers a rebuilt DataLoader takes the base seed the
plain loader's workers were given in the first epoch, from a copy of the generator's state then,
without drawing from the loader's generator (or torch's default one) again. Workers get the plain
loader's seeds (base seed + worker id, as torch seeds torch, random and numpy in a worker), and
get_worker_info().dataset is the dataset (a batch's start is marked when its index is unpickled
in the worker, not by wrapping the dataset). An exception from a batch is the plain loader's, and
the epoch goes on after it as the plain iterator does (that epoch decides nothing). What a
different num_workers changes by torch's own rules, and tuning therefore does: batch i is loaded
by worker i mod num_workers (get_worker_info().id and num_workers, a worker-side RNG's stream, and
the worker an exception's message names follow the tuned count); with persistent workers a change
restarts them, so worker_init_fn runs again and their RNGs start again from their seeds (the plain
loader's continue); a loader with num_workers=0 runs in workers from the second epoch, where
get_worker_info() is no longer None and exceptions arrive as torch's "Caught ... in DataLoader
worker process" re-raise (same type; a type that cannot be rebuilt from a message becomes a
RuntimeError, as with any worker).

torchdata's StatefulDataLoader is tuned as one (AutotunedStatefulLoader): the tuned
loaders are StatefulDataLoaders (snapshot_every_n_steps kept), and the sampler's iterator keeps its
state_dict() through _Sent, so a state taken from the tuned object resumes the epoch at the
setting it ran (torchdata resumes only with the num_workers a state was taken with). That state is
the tuned StatefulDataLoader's own with the setting under one more key, "lotus.autotune", which
StatefulDataLoader's load_state_dict ignores (it reads its own keys only): a job that drops
autotune loads it into a plain StatefulDataLoader of that num_workers and resumes.
"""

from .loader import AutotunedLoader, AutotunedStatefulLoader, autotune
from .measure import EpochMeasurement, _pss, _rss, handoff_of
from .model import predict_memory, simulate_epoch
from .tuner import (PREFETCH_FACTORS, Tuner, check_arguments, decision_line, memory_budget_bytes,
                    pytorch_suggested_max_workers)

__all__ = ["autotune", "AutotunedLoader", "Tuner", "EpochMeasurement", "simulate_epoch",
           "memory_budget_bytes", "pytorch_suggested_max_workers", "check_arguments"]
