# SPDX-License-Identifier: MIT
"""lotus.torch.autotune changes nothing the training loop receives (issue #61 item 2): each case
runs the same DataLoader plain and tuned, with the same seeds, and compares every batch of every
epoch.

The tuned loader's moves are planned (its tuner's decide() replaced by a list of settings), so
that each case changes num_workers and prefetch_factor at known epochs; one case lets the real
tuner move. What a sample carries: its index (plus what worker_init_fn configured on the
dataset), and the base seed its worker was given (get_worker_info().seed - id: every worker's
torch, random and numpy seeds derive from it); the pid says which process loaded it (compared
with the plan, not with the plain loader's). Nothing timed is asserted."""
import os

import pytest

torch = pytest.importorskip("torch")
import lotus.torch  # noqa: E402

N = 24


class Indexed(torch.utils.data.Dataset):
    """Sample i: [i + offset, the worker's base seed (-1 in the main process), pid]."""

    def __init__(self, fail_at=()):
        self.offset = 0
        self.fail_at = set(fail_at)

    def __len__(self):
        return N

    def __getitem__(self, i):
        if i in self.fail_at:
            raise ValueError(f"sample {i} is corrupt")
        info = torch.utils.data.get_worker_info()
        base = -1 if info is None else info.seed - info.id
        return torch.tensor([i + self.offset, base, os.getpid()], dtype=torch.int64)


def configure_worker(worker_id):
    # PyTorch's documented pattern: configure this worker's copy of the dataset.
    info = torch.utils.data.get_worker_info()
    assert type(info.dataset) is Indexed, type(info.dataset)
    info.dataset.offset = 1000


def planned(tuned, plan):
    """The tuned loader takes plan[k] after epoch k + 1 (and stays on the last)."""
    moves = list(plan)

    def decide(m):
        return moves.pop(0) if moves else tuned.setting
    tuned.tuner.decide = decide
    return tuned


def run(loader, epochs, values=2):
    """Every epoch's batches (each sample's first `values` values), and the pids per epoch."""
    got, pids = [], []
    for _ in range(epochs):
        batches, seen = [], set()
        for b in loader:
            batches.append(b[:, :values].tolist())
            seen.update(b[:, 2].tolist())
        got.append(batches)
        pids.append(seen)
    return got, pids


def ran_plan(pids, settings):
    """Each epoch ran as many worker processes as its setting has workers (0: the main process)."""
    for e, (workers, _pf) in enumerate(settings):
        assert len(pids[e]) == max(1, workers), (e, settings)
        if workers == 0:
            assert pids[e] == {os.getpid()}


def make(seed, persistent=True, workers=2, **kw):
    g = torch.Generator()
    g.manual_seed(seed)
    return torch.utils.data.DataLoader(Indexed(), batch_size=4, shuffle=True, generator=g,
                                       num_workers=workers, persistent_workers=persistent, **kw)


PLAN = [(3, 2), (3, 4), (1, 2)]  # epoch 2: 3 workers, epoch 3: prefetch 4, epoch 4: 1 worker


@pytest.mark.parametrize("persistent", [True, False])
def test_shuffled_epochs_and_worker_seeds_are_the_plain_loaders(persistent):
    # Persistent: the plain loader draws one base seed (epoch 1) from the generator; each rebuilt
    # tuned DataLoader drew another, so epochs 2-4 came in another order and their workers had
    # other seeds. Not persistent: both draw one per epoch. The worker_init_fn configures the
    # dataset it is given: the tuned one gave a wrapper (samples without the offset).
    plain = make(7, persistent, worker_init_fn=configure_worker)
    want, _ = run(plain, 4)
    assert len({b[0][0][1] for b in want}) == (1 if persistent else 4)  # base seeds per epoch
    assert all(s[0] >= 1000 for e in want for b in e for s in b)
    loader = make(7, persistent, worker_init_fn=configure_worker)
    tuned = planned(lotus.torch.autotune(loader, verbose=False), PLAN)
    got, pids = run(tuned, 4)
    tuned.close()
    ran_plan(pids, [(2, 2)] + PLAN)
    assert got == want
    # The generator is where the plain loader left it: the training loop's own draws match too.
    assert torch.equal(loader.generator.get_state(), plain.generator.get_state())


def test_torchs_default_generator_is_drawn_from_as_by_the_plain_loader():
    # No generator: the sampler and the base seed draw from torch's default generator, which the
    # training loop draws from too (here: one draw per epoch). The plain persistent loader
    # draws the base seed once.
    def loop(loader):
        torch.manual_seed(11)
        got, after = [], []
        for _ in range(4):
            got.append([b[:, :2].tolist() for b in loader])
            after.append(torch.randint(1 << 30, ()).item())  # the training step's own draw
        return got, after

    def make_default():
        return torch.utils.data.DataLoader(Indexed(), batch_size=4, shuffle=True, num_workers=2,
                                           persistent_workers=True)
    want = loop(make_default())
    tuned = planned(lotus.torch.autotune(make_default(), verbose=False), PLAN)
    got = loop(tuned)
    tuned.close()
    assert got == want


class DrawingBatches(torch.utils.data.Sampler):
    """A batch_sampler that draws its permutation from a generator in __iter__ itself (not lazily
    as torch's samplers do): the plain DataLoader calls it once per epoch without workers, twice
    with workers."""

    def __init__(self, generator, batch_size=4):
        self.generator = generator
        self.batch_size = batch_size

    def __len__(self):
        return N // self.batch_size

    def __iter__(self):
        order = torch.randperm(N, generator=self.generator).tolist()
        return iter([order[i:i + self.batch_size] for i in range(0, N, self.batch_size)])


class DrawingSampler(torch.utils.data.Sampler):
    """The same, one index at a time (a DataLoader with batch_size=None)."""

    def __init__(self, generator):
        self.generator = generator

    def __len__(self):
        return N

    def __iter__(self):
        return iter(torch.randperm(N, generator=self.generator).tolist())


def single(samples):
    return samples.unsqueeze(0)  # batch_size=None: one sample, made a batch of one


@pytest.mark.parametrize("case", ["batch_sampler", "sampler"])
def test_any_sampler_is_asked_as_often_as_by_the_plain_loader(case):
    # From num_workers=0 the tuned loader moves to workers: it called iter() on the sampler twice
    # an epoch (the plain loader once), and this sampler drew twice.
    def make_loader():
        g = torch.Generator()
        g.manual_seed(3)
        if case == "batch_sampler":
            return torch.utils.data.DataLoader(Indexed(), batch_sampler=DrawingBatches(g),
                                               generator=g)
        return torch.utils.data.DataLoader(Indexed(), sampler=DrawingSampler(g), batch_size=None,
                                           collate_fn=single, generator=g)
    want, _ = run(make_loader(), 4, values=1)
    loader = make_loader()
    tuned = planned(lotus.torch.autotune(loader, verbose=False), [(2, 2), (3, 1), (1, 2)])
    got, pids = run(tuned, 4, values=1)
    tuned.close()
    ran_plan(pids, [(0, 2), (2, 2), (3, 1), (1, 2)])
    assert got == want


def test_a_persistent_eager_sampler_after_a_restart():
    # Persistent workers: the plain loader asks the sampler once per epoch after the first; a
    # rebuilt tuned DataLoader asked it twice.
    def make_loader():
        g = torch.Generator()
        g.manual_seed(5)
        return torch.utils.data.DataLoader(Indexed(), batch_sampler=DrawingBatches(g),
                                           generator=g, num_workers=1, persistent_workers=True)
    want, _ = run(make_loader(), 4)
    tuned = planned(lotus.torch.autotune(make_loader(), verbose=False), PLAN)
    got, pids = run(tuned, 4)
    tuned.close()
    ran_plan(pids, [(1, 2)] + PLAN)
    assert got == want


def failures(loader, dataset):
    """What a loop that skips a failing batch receives over 3 epochs, samples 5 and 17 failing in
    the second: the batches, and each exception's type and its message's last line (the error
    itself; the lines before it name the worker, and which worker loads a batch depends on
    num_workers)."""
    out = []
    for epoch in range(3):
        dataset.fail_at = {5, 17} if epoch == 1 else set()  # workers start each epoch: they see it
        it = iter(loader)
        while True:
            try:
                b = next(it)
            except StopIteration:
                break
            except Exception as e:  # noqa: BLE001 (the loop under test skips the batch)
                out.append((type(e).__name__, str(e).strip().splitlines()[-1]))
                continue
            out.append(b[:, :2].tolist())
    return out


@pytest.mark.parametrize("workers,plan", [(0, [(0, 2), (0, 1)]), (2, [(3, 2), (1, 2)])])
def test_a_failing_sample_raises_what_the_plain_loader_raises_and_the_epoch_goes_on(workers, plan):
    # The tuned epoch was a generator: after the first exception it ended (StopIteration), and
    # the loop received none of the epoch's later batches.
    def make_loader():
        g = torch.Generator()
        g.manual_seed(9)
        return torch.utils.data.DataLoader(Indexed(), batch_size=4, shuffle=True, generator=g,
                                           num_workers=workers)
    plain = make_loader()
    want = failures(plain, plain.dataset)
    errors = [x for x in want if isinstance(x, tuple)]
    assert sorted(errors) == [("ValueError", f"{'ValueError: ' if workers else ''}sample {i} is "
                                             f"corrupt") for i in (17, 5)]
    loader = make_loader()
    tuned = planned(lotus.torch.autotune(loader, verbose=False), plan)
    got = failures(tuned, loader.dataset)
    tuned.close()
    assert got == want
    # Epochs 1 and 3 decided; epoch 2, which raised, decided nothing.
    assert tuned.setting == plan[1]


@pytest.mark.parametrize("kwargs", [
    {"max_workers": 0}, {"max_workers": -1}, {"max_workers": 2.5}, {"max_workers": True},
    {"max_workers": "4"}, {"cores": 0}, {"cores": -2}, {"cores": float("nan")},
    {"tolerance": -0.1}, {"tolerance": float("inf")}, {"prefetch_factors": ()},
    {"prefetch_factors": (0, 2)}, {"prefetch_factors": (1.5,)}, {"memory_budget": True},
])
def test_bad_arguments_are_refused(kwargs):
    from lotus.autotune import check_arguments
    loader = torch.utils.data.DataLoader(Indexed(), batch_size=4)
    name = next(iter(kwargs))
    with pytest.raises(ValueError, match=name):
        lotus.torch.autotune(loader, **kwargs)
    with pytest.raises(ValueError, match=name):
        check_arguments(**kwargs)


def test_good_arguments_are_taken():
    from lotus.autotune import check_arguments
    assert check_arguments(max_workers=3, cores=1.5, tolerance=0, prefetch_factors=[2]) == (
        3, 1.5, 0.0, (2,))
    assert check_arguments() == (None, None, 0.03, (1, 2, 4))
    with pytest.raises(ValueError, match="num_workers=0: nothing to tune"):
        check_arguments(max_workers=0)
    with pytest.raises(TypeError, match="DataLoader"):
        lotus.torch.autotune([1, 2, 3])


def test_the_real_tuner_moves_and_the_batches_are_the_plain_loaders():
    # As test_autotune.py's DataLoader test: I/O-like samples from 1 persistent worker, which the
    # tuner leaves for more workers after the first epoch.
    import time

    class Slow(Indexed):
        def __getitem__(self, i):
            time.sleep(0.004)
            return super().__getitem__(i)

    def make_loader():
        g = torch.Generator()
        g.manual_seed(13)
        return torch.utils.data.DataLoader(Slow(), batch_size=4, shuffle=True, generator=g,
                                           num_workers=1, persistent_workers=True)
    want, _ = run(make_loader(), 4)
    tuned = lotus.torch.autotune(make_loader(), max_workers=3, verbose=False)
    got, pids = run(tuned, 4)
    tuned.close()
    assert tuned.decisions[0]["changed"] and tuned.decisions[0]["workers"] > 1
    assert len(pids[1]) == tuned.decisions[0]["workers"]
    assert got == want


def test_a_failing_decision_is_a_warning_not_the_loops_exception():
    # The tuner's own failure at an epoch boundary ended the training loop with its exception.
    want, _ = run(make(21, persistent=False), 3)
    tuned = lotus.torch.autotune(make(21, persistent=False), verbose=False)

    def broken(m):
        raise ZeroDivisionError("planted")
    tuned.tuner.decide = broken
    with pytest.warns(RuntimeWarning, match="ZeroDivisionError: planted.*keeps 2 workers"):
        got, _ = run(tuned, 3)
    tuned.close()
    assert got == want and tuned.setting == (2, 2)


def settling(tuned, plan):
    """The real tuner decides (its decisions recorded), but the tuned loader takes plan[k] after
    epoch k + 1 and settles after the last: from then on its epochs run the plain loader."""
    moves = list(plan)
    tuner = tuned.tuner
    real = tuner.decide

    def decide(m):
        real(m)
        nxt = moves.pop(0)
        tuner.workers, tuner.prefetch_factor = nxt
        tuner.decisions[-1].update(workers=nxt[0], prefetch_factor=nxt[1])
        if not moves:
            tuner._settle()
        return nxt
    tuner.decide = decide
    return tuned


@pytest.mark.parametrize("case", ["shuffle", "batch_sampler"])
def test_settled_epochs_run_the_plain_loader_and_receive_the_same(case):
    # Once settled the tuned loader measures nothing: its DataLoader takes the loader's own
    # collate_fn and the sampler's own iterator. The samples, their order, the workers' seeds and
    # the sampler's draws stay the plain loader's, through the switch and after it.
    def make_loader():
        if case == "shuffle":
            return make(9, persistent=False, worker_init_fn=configure_worker)
        g = torch.Generator()
        g.manual_seed(9)
        return torch.utils.data.DataLoader(Indexed(), batch_sampler=DrawingBatches(g),
                                           generator=g, num_workers=2)
    plain = make_loader()
    want, _ = run(plain, 6)
    loader = make_loader()
    tuned = settling(lotus.torch.autotune(loader, verbose=False), [(3, 2), (1, 2)])
    got, pids = run(tuned, 6)
    assert tuned._current.collate_fn is loader.collate_fn  # the plain one, not measured
    tuned.close()
    ran_plan(pids, [(2, 2), (3, 2), (1, 2), (1, 2), (1, 2), (1, 2)])
    assert got == want
    assert torch.equal(loader.generator.get_state(), plain.generator.get_state())
    d = tuned.decisions
    assert len(d) == 6 and [x.get("quiet", False) for x in d] == [False] * 2 + [True] * 4
    for x in d[2:]:
        assert x["settled"] and (x["workers"], x["prefetch_factor"]) == (1, 2)
        assert x["previous"]["measured_epoch_seconds"] > 0
    for x in d[:-1]:  # each decision checked against the epoch that followed it
        assert x["measured_epoch_seconds"] is not None and x["error"] is not None
