"""tokenizer.py — trains the demonstration model's byte-level BPE tokenizer on the synthetic corpus.

The result has the shape of a real Qwen3.5/3.6 tokenizer, so it loads through the same code: the
Qwen3.5 split regex (combining marks join letter runs) followed by byte-level encoding, NFC, a BPE
model with merges, and the Qwen special tokens as added tokens placed after the BPE vocabulary
(<|endoftext|>, <|im_start|>, <|im_end|> special; <tool_call>, <think> and friends not special, as
in the published tokenizer_config.json). Written next to it: tokenizer_config.json (with the
official Qwen3.6 chat template) and chat_template.jinja.

    python3 train/tokenizer.py --out DIR [--vocab 1024] [--n 30000] [--seed 99]

HuggingFace `tokenizers` is a build-time tool here; the engine never uses it.
"""
import argparse
import json
import os
import random
import sys

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402

QWEN35_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# (content, special) in the order of the published Qwen3.6 tokenizer
ADDED = [("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
         ("<tool_call>", False), ("</tool_call>", False), ("<tool_response>", False), ("</tool_response>", False),
         ("<think>", False), ("</think>", False)]

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def template_path():
    for d in (os.environ.get("LILAC_SHARED"), os.path.join(ROOT, "..", "shared"), "/work/shared"):
        p = os.path.join(d or "", "reference", "templates", "qwen3.6-35b-a3b.chat_template.jinja")
        if d and os.path.isfile(p):
            return p
    raise SystemExit("tokenizer.py: the Qwen3.6 chat template was not found (set LILAC_SHARED)")


def build(texts, vocab):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN35_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    specials = [c for c, _ in ADDED]
    # the special tokens are cut out of the training text so that no merge spans them
    def pieces():
        for t in texts:
            for s in specials:
                t = t.replace(s, "\n")
            yield t
    trainer = trainers.BpeTrainer(vocab_size=vocab - len(ADDED), min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    tok.train_from_iterator(pieces(), trainer=trainer)
    assert tok.get_vocab_size() <= vocab - len(ADDED), tok.get_vocab_size()
    from tokenizers import AddedToken
    for c, special in ADDED:
        at = AddedToken(c, special=special, normalized=False, single_word=False, lstrip=False, rstrip=False)
        if special:
            tok.add_special_tokens([at])
        else:
            tok.add_tokens([at])
    return tok


def write(tok, out):
    os.makedirs(out, exist_ok=True)
    tok.save(os.path.join(out, "tokenizer.json"))
    tpl = open(template_path(), encoding="utf-8").read()
    with open(os.path.join(out, "chat_template.jinja"), "w", encoding="utf-8") as f:
        f.write(tpl)
    dec = {}
    for c, special in ADDED:
        dec[str(tok.token_to_id(c))] = {"content": c, "lstrip": False, "normalized": False, "rstrip": False,
                                        "single_word": False, "special": special}
    cfg = {"add_prefix_space": False, "added_tokens_decoder": dec,
           "additional_special_tokens": ["<|im_start|>", "<|im_end|>"], "bos_token": None,
           "clean_up_tokenization_spaces": False, "eos_token": "<|im_end|>", "errors": "replace",
           "model_max_length": 4096, "pad_token": "<|endoftext|>", "split_special_tokens": False,
           "tokenizer_class": "Qwen2Tokenizer", "unk_token": None, "add_bos_token": False,
           "pretokenize_regex": QWEN35_REGEX, "chat_template": tpl}
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2, ensure_ascii=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab", type=int, default=1024)
    ap.add_argument("--n", type=int, default=30000, help="conversations to train the merges on")
    ap.add_argument("--seed", type=int, default=99)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    texts = [corpus.render(corpus.make_train_example(rng))[0] for _ in range(a.n)]
    tok = build(texts, a.vocab)
    write(tok, a.out)
    print(f"{a.out}: vocab {tok.get_vocab_size()} (BPE {tok.get_vocab_size() - len(ADDED)} + {len(ADDED)} added)")


if __name__ == "__main__":
    main()
