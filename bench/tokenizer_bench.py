"""Tokenizer encode throughput: lilac vs HuggingFace `tokenizers`, same text, same machine, same run.

    python3 bench/tokenizer_bench.py [--lilac build/lilac] [--mb 6] [--out bench/results/tokenizer.md]

Corpus (built fresh, deterministic): about one third each of
  - English prose: the Debian copyright files under /usr/share/doc (licences, credits);
  - code: C headers under /usr/include and the Python standard library;
  - CJK: text sampled from the Qwen3 vocabulary's Chinese/Japanese/Korean tokens (decoded), in
    sentence-like runs with CJK punctuation (a stand-in: no CJK corpus ships with Debian).
Both encoders get the whole corpus as one string, single thread (RAYON_NUM_THREADS=1), without
special-token handling differences (no added tokens occur). The ids must match exactly.
"""
import argparse, glob, gzip, json, os, random, subprocess, sys, tempfile, time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def collect(paths, limit):
    out, n = [], 0
    for p in paths:
        try:
            t = open(p, encoding="utf-8").read()
        except (UnicodeDecodeError, OSError):
            continue
        out.append(t)
        n += len(t.encode())
        if n >= limit:
            break
    return "\n".join(out)


def cjk_text(tok, limit, rng):
    vocab = tok.get_vocab()
    from tokenizers import decoders
    dec = decoders.ByteLevel()
    pieces = []
    for s in vocab:
        t = dec.decode([s])
        if t and all(0x3040 <= ord(c) <= 0x30FF or 0x4E00 <= ord(c) <= 0x9FFF or 0xAC00 <= ord(c) <= 0xD7A3 for c in t):
            pieces.append(t)
    pieces.sort()
    punct = ["，", "。", "、", "！", "？", "「", "」", "\n"]
    out, n = [], 0
    while n < limit:
        sent = "".join(rng.choice(pieces) for _ in range(rng.randint(3, 20))) + rng.choice(punct)
        out.append(sent)
        n += len(sent.encode())
    return "".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lilac", default="build/lilac")
    ap.add_argument("--tokenizer", default=None, help="tokenizer.json (default: shared qwen3, decompressed)")
    ap.add_argument("--mb", type=float, default=6.0)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    from tokenizers import Tokenizer, __version__ as hf_version

    tmp = tempfile.mkdtemp(prefix="lilac-tokbench-")
    tj = a.tokenizer
    if not tj:
        shared = os.environ.get("LILAC_SHARED") or next(p for p in ("../shared", "/work/shared") if os.path.isdir(p))
        tj = os.path.join(tmp, "tokenizer.json")
        with gzip.open(os.path.join(shared, "reference/tokenizers/qwen3/tokenizer.json.gz")) as f:
            open(tj, "wb").write(f.read())
    hf = Tokenizer.from_file(tj)
    rng = random.Random(1234)
    part = int(a.mb * 1e6 / 3)
    english = collect(sorted(glob.glob("/usr/share/doc/*/copyright")), part)
    code = collect(sorted(glob.glob("/usr/include/*.h")) + sorted(glob.glob("/usr/lib/python3*/*.py")), part)
    cjk = cjk_text(hf, part, rng)
    rows = []
    for name, text in [("english", english), ("code", code), ("cjk", cjk), ("mixed", english + code + cjk)]:
        path = os.path.join(tmp, name + ".txt")
        open(path, "w", encoding="utf-8").write(text)
        nbytes = len(text.encode())
        best_hf, ids_hf = 1e9, None
        for _ in range(3):
            t0 = time.perf_counter()
            enc = hf.encode(text, add_special_tokens=False)
            best_hf = min(best_hf, time.perf_counter() - t0)
            ids_hf = enc.ids
        # HF is much faster on many short inputs than on one long string: measure that too
        lines = text.splitlines(keepends=True)
        t0 = time.perf_counter()
        hf.encode_batch(lines, add_special_tokens=False)
        hf_lines = time.perf_counter() - t0
        best_ll, ids_ll = 1e9, None
        for _ in range(3):
            r = subprocess.run([a.lilac, "tokenize", "-t", tj, "--stats"], stdin=open(path, "rb"), capture_output=True, check=True)
            secs = float(r.stderr.decode().split(" s,")[0].split(",")[-1])
            best_ll = min(best_ll, secs)
            ids_ll = json.loads(r.stdout)
        same = ids_ll == ids_hf
        rows.append((name, nbytes, len(ids_hf), nbytes / best_hf / 1e6, nbytes / hf_lines / 1e6, nbytes / best_ll / 1e6, same))
        print(f"{name:8s} {nbytes/1e6:6.2f} MB {len(ids_hf):9d} tokens  HF {nbytes/best_hf/1e6:7.2f} MB/s"
              f"  HF per line {nbytes/hf_lines/1e6:7.2f} MB/s"
              f"  lilac {nbytes/best_ll/1e6:7.2f} MB/s  ids {'identical' if same else 'DIFFER'}", flush=True)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    md = [f"# Tokenizer encode throughput ({time.strftime('%Y-%m-%d')})", "",
          f"Qwen3 tokenizer (151,643 BPE tokens), one thread, best of 3; CPU: {cpu}; HF tokenizers {hf_version}.",
          "lilac's time is tok_encode of the whole text (load excluded); HF's is Tokenizer.encode of the same",
          "string, and (HF per line) encode_batch of its lines with RAYON_NUM_THREADS=1, which suits HF better.",
          "The 2-core machine was shared with other builds while this ran: compare columns, not runs.", "",
          "| text | MB | tokens | HF whole MB/s | HF per line MB/s | lilac MB/s | ids identical to HF |",
          "|---|---|---|---|---|---|---|"]
    for n, b, t, h, hl, l, s in rows:
        md.append(f"| {n} | {b/1e6:.2f} | {t} | {h:.2f} | {hl:.2f} | {l:.2f} | {'yes' if s else 'NO'} |")
    text = "\n".join(md) + "\n"
    if a.out:
        open(a.out, "w").write(text)
    print(text)
    sys.exit(0 if all(r[6] for r in rows) else 1)


if __name__ == "__main__":
    main()
