"""data.py — renders and tokenizes the synthetic corpus into the arrays the trainer reads.

    python3 train/data.py --tokenizer DIR --n 250000 --seed 1 --out data.npz [--workers 16]

With --workers W the conversations are made in W processes, worker k drawing from seed
`seed * 1000 + k` (so the result depends on W; W = 1 gives the single-stream data of earlier runs).

data.npz holds `ids` (uint16, all conversations back to back), `mask` (uint8, 1 where the token is
something the assistant writes: the loss is taken there only) and `offsets` (int64 [n + 1], where each
conversation starts). Text between two added tokens is tokenized on its own by the tokenizer anyway
(added tokens split the input first), so each such segment is encoded once and cached: the long tools
system prompt then costs nothing after its first appearance.
"""
import argparse
import os
import random
import re
import sys

import numpy as np
from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402
from tokenizer import ADDED  # noqa: E402

SPECIAL_RE = re.compile("(" + "|".join(re.escape(c) for c, _ in ADDED) + ")")


class Encoder:
    def __init__(self, path):
        self.tok = Tokenizer.from_file(path)
        self.special = {c: self.tok.token_to_id(c) for c, _ in ADDED}
        self.cache = {}

    def segments(self, text):
        """-> [(start, piece, is_special)] covering text."""
        out, pos = [], 0
        for m in SPECIAL_RE.finditer(text):
            if m.start() > pos:
                out.append((pos, text[pos:m.start()], False))
            out.append((m.start(), m.group(0), True))
            pos = m.end()
        if pos < len(text):
            out.append((pos, text[pos:], False))
        return out

    def encode_many(self, rendered):
        """rendered: [(text, spans)] -> [(ids uint16, mask uint8)]"""
        todo = sorted({p for text, _ in rendered for _, p, sp in self.segments(text) if not sp and p not in self.cache})
        for p, enc in zip(todo, self.tok.encode_batch(todo, add_special_tokens=False)):
            ids = enc.ids
            starts = [o[0] for o in enc.offsets]
            if len(p) > 200:  # long segments repeat (system prompts); short unique ones are not kept
                self.cache[p] = (ids, starts)
            else:
                self.cache.setdefault("__tmp__", {})[p] = (ids, starts)
        tmp = self.cache.pop("__tmp__", {})
        out = []
        for text, spans in rendered:
            ids, starts = [], []
            for base, p, sp in self.segments(text):
                if sp:
                    ids.append(self.special[p])
                    starts.append(base)
                else:
                    pi, ps = self.cache.get(p) or tmp[p]
                    ids += pi
                    starts += [base + s for s in ps]
            mask = np.zeros(len(ids), np.uint8)
            st = np.array(starts)
            for a, b in spans:
                mask[(st >= a) & (st < b)] = 1
            out.append((np.array(ids, np.uint16), mask))
        return out


def build(tokenizer_dir, n, seed, chunk=5000):
    enc = Encoder(os.path.join(tokenizer_dir, "tokenizer.json"))
    rng = random.Random(seed)
    ids, masks, lens = [], [], []
    for start in range(0, n, chunk):
        batch = [corpus.render(corpus.make_train_example(rng)) for _ in range(min(chunk, n - start))]
        for i, m in enc.encode_many(batch):
            ids.append(i)
            masks.append(m)
            lens.append(len(i))
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    return np.concatenate(ids), np.concatenate(masks), offsets


def build_part(args):
    tokenizer_dir, n, seed = args
    return build(tokenizer_dir, n, seed)


def build_parallel(tokenizer_dir, n, seed, workers):
    if workers <= 1:
        return build(tokenizer_dir, n, seed)
    import multiprocessing as mp
    sizes = [n // workers + (k < n % workers) for k in range(workers)]
    with mp.get_context("fork").Pool(workers) as pool:
        parts = pool.map(build_part, [(tokenizer_dir, sz, seed * 1000 + k) for k, sz in enumerate(sizes)])
    ids = np.concatenate([p[0] for p in parts])
    mask = np.concatenate([p[1] for p in parts])
    lens = np.concatenate([np.diff(p[2]) for p in parts])
    return ids, mask, np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokenizer", required=True, help="folder with tokenizer.json")
    ap.add_argument("--n", type=int, default=250000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True)
    ap.add_argument("--workers", type=int, default=1, help="processes (see above)")
    a = ap.parse_args()
    ids, mask, offsets = build_parallel(a.tokenizer, a.n, a.seed, a.workers)
    np.savez_compressed(a.out, ids=ids, mask=mask, offsets=offsets)
    print(f"{a.out}: {a.n} conversations, {len(ids)} tokens ({mask.sum()} trained), "
          f"mean length {len(ids) / a.n:.1f}, max {np.diff(offsets).max()}")


if __name__ == "__main__":
    main()
