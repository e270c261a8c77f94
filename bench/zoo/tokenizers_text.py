# SPDX-License-Identifier: MIT
"""A text pipeline with Hugging Face `tokenizers`: a BPE tokenizer trained from a generated corpus
(BpeTrainer, no hub download), saved to tokenizer.json and loaded back (Tokenizer.from_file), a
dataset of text lines whose collate_fn tokenizes a batch with encode_batch (padding and truncation
to 128 tokens) into input ids, attention mask and labels, behind a torch DataLoader.
Data: 6000 generated lines of 20-80 words over a 3000-word vocabulary (about 2 MB)."""

import os

import numpy as np
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

import zoo_common as zc

LINES = 6000


def make(root, lines=LINES):
    rng = np.random.default_rng(0)
    syll = ["ka", "lo", "mi", "re", "tu", "sha", "no", "vi", "den", "ar", "ul", "pe", "zo", "qi"]
    vocab = ["".join(rng.choice(syll, rng.integers(1, 4))) + str(i % 7) for i in range(3000)]
    p = 1.0 / np.arange(1, 3001)
    p /= p.sum()
    with open(os.path.join(root, "corpus.txt"), "w") as f:
        for _ in range(lines):
            words = rng.choice(vocab, rng.integers(20, 81), p=p)
            f.write(" ".join(words) + ".\n")
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=4000, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"])
    tok.train([os.path.join(root, "corpus.txt")], trainer)
    tok.save(os.path.join(root, "tokenizer.json"))


class Lines(torch.utils.data.Dataset):
    def __init__(self, path):
        with open(path) as f:
            self.lines = f.read().splitlines()

    def __len__(self):
        return len(self.lines)

    def __getitem__(self, i):
        return self.lines[i], len(self.lines[i]) % 5


class Collate:
    def __init__(self, path):
        self.tok = Tokenizer.from_file(path)
        self.tok.enable_padding(pad_id=0, pad_token="[PAD]", length=128)
        self.tok.enable_truncation(max_length=128)

    def __call__(self, items):
        enc = self.tok.encode_batch([t for t, _ in items])
        return {"input_ids": torch.tensor([e.ids for e in enc]),
                "attention_mask": torch.tensor([e.attention_mask for e in enc]),
                "labels": torch.tensor([y for _, y in items])}


def main():
    args = zc.parse(__doc__.splitlines()[0], scalable=True)
    zc.start(args)
    n = zc.scaled(args, LINES)
    data = zc.Data(args, zc.tag(args, f"tokenizers_text-{LINES}"), lambda r: make(r, n))
    with data as root:
        torch.manual_seed(args.seed)
        loader = torch.utils.data.DataLoader(
            Lines(os.path.join(root, "corpus.txt")), batch_size=64, shuffle=True,
            num_workers=args.workers, collate_fn=Collate(os.path.join(root, "tokenizer.json")),
            **zc.loader_kwargs(args))
        epochs, digest = zc.run_epochs(args, lambda e: loader)
        zc.emit("tokenizers_text", args, epochs, digest, data, ("tokenizers",))


if __name__ == "__main__":
    main()
