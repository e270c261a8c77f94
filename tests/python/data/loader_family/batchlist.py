# SPDX-License-Identifier: MIT
"""batchlist: a stand-in for the next loader library (tests/python/test_loader_contract.py). A
Loader yields the batches of a list of samples, each collated in the consumer's next()."""

__version__ = "0.1"


def collate(samples):
    return [s * 2 for s in samples]


class Loader:
    def __init__(self, samples, batch_size):
        self.samples = list(samples)
        self.batch_size = batch_size

    def __iter__(self):
        for i in range(0, len(self.samples), self.batch_size):
            yield collate(self.samples[i:i + self.batch_size])
