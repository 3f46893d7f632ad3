"""A small `qwen3_5_moe` model that speaks through the real Qwen3 tokenizer, for server tests.

The weights are the tiny fixture's (4 layers, hidden 128) with three changes:
  - every block's output projection is zero, so the final hidden state is the embedding of the
    last token and the model is a fixed map "last token -> next-token logits";
  - embeddings and lm_head cover the Qwen3 vocabulary (151,680 rows);
  - a few token chains are written into that map, so chat answers are scripted:

      "<think>\\n" ends a thinking prompt  -> "Let me think</think>\\n\\nHello world!" <|im_end|>
      "</think>\\n\\n" ends a non-thinking prompt -> "Hello world!" <|im_end|>
      the same, with logit_bias {tool_trigger: +100} -> a Qwen XML call of get_weather(city=Paris)

    Any other last token continues with random text that never reaches a chain token or an
    end-of-sequence token (long generations run to max_tokens).

Chains are built from tokens chosen so that no token appears twice (the map has no memory): each
text is covered greedily by the longest vocabulary entry not used yet. The chain logits dominate
(about 565 against about 1), so chains are followed even when sampling.
"""
import gzip
import json
import pathlib
import shutil

import numpy as np
from safetensors.numpy import load_file, save_file

VOCAB = 151680          # the tokenizer's 151,669 ids, padded
H = 128
CHAIN_DIMS = 64         # one-hot embedding dimensions for chain tokens
MARK = H - 1            # constant marker dimension of every non-chain token
IM_END, ENDOFTEXT, TOOL_CALL = 151645, 151643, 151657
NL, NLNL = 198, 271     # "\n" (ends "<think>\n"), "\n\n" (ends "</think>\n\n")

THINK_TEXT = "Let me think"
ANSWER_TEXT = "Hello world!"
# The vocabulary has only four tokens holding ">" inside this text (">", "><", ">P", "></"), so the
# call is written without the template's newlines and ends after its last parameter: the parser
# accepts a call cut there (every parameter complete) and needs neither the newlines nor the
# closing tags. The call starts with the <tool_call> token itself.
TOOL_TEXT = "<function=get_weather><parameter=city>Paris</parameter>"


def _byte_decoder():
    """GPT-2 byte-level alphabet: the unicode character that stands for each byte."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    chars, n = {}, 0
    for b in range(256):
        if b in keep:
            chars[chr(b)] = b
        else:
            chars[chr(256 + n)] = b
            n += 1
    return chars


def _vocab_bytes(tok):
    dec = _byte_decoder()
    out = {}
    for s, i in tok["model"]["vocab"].items():
        out[bytes(dec[c] for c in s)] = i
    return out


def _cover(text, vocab, used):
    """Token ids whose bytes concatenate to text, none in `used` (which grows): a depth-first
    search that tries the longest unused vocabulary entry first."""
    data = text.encode()

    def dfs(pos, taken):
        if pos == len(data):
            return []
        for end in range(min(len(data), pos + 24), pos, -1):
            i = vocab.get(data[pos:end])
            if i is None or i in used or i in taken:
                continue
            rest = dfs(end, taken | {i})
            if rest is not None:
                return [i] + rest
        return None

    ids = dfs(0, frozenset())
    if ids is None:
        raise RuntimeError(f"cannot cover {text!r} with unused tokens")
    used.update(ids)
    return ids


def make_chat_model(fixtures: pathlib.Path, refdir: pathlib.Path, dst: pathlib.Path) -> dict:
    """Writes the model into dst; returns the chains (token ids) for the tests."""
    dst.mkdir(parents=True, exist_ok=True)
    with gzip.open(refdir / "tokenizers" / "qwen3" / "tokenizer.json.gz", "rb") as f:
        raw = f.read()
    (dst / "tokenizer.json").write_bytes(raw)
    tok = json.loads(raw)
    shutil.copy(refdir / "tokenizers" / "qwen3" / "tokenizer_config.json", dst / "tokenizer_config.json")
    shutil.copy(refdir / "templates" / "qwen3.6-35b-a3b.chat_template.jinja", dst / "chat_template.jinja")

    cfg = json.loads((fixtures / "tiny" / "config.json").read_text())
    cfg["text_config"]["vocab_size"] = VOCAB
    cfg["text_config"]["eos_token_id"] = IM_END
    cfg["image_token_id"], cfg["video_token_id"] = 151655, 151656
    cfg["vision_start_token_id"], cfg["vision_end_token_id"] = 151652, 151653
    (dst / "config.json").write_text(json.dumps(cfg, indent=2))
    (dst / "generation_config.json").write_text(json.dumps({"eos_token_id": [IM_END, ENDOFTEXT]}))

    vocab = _vocab_bytes(tok)
    used = {NL, NLNL, IM_END, ENDOFTEXT, TOOL_CALL}  # never part of a covered text
    think = _cover(THINK_TEXT, vocab, used)
    answer = _cover(ANSWER_TEXT, vocab, used)
    tool = [TOOL_CALL] + _cover(TOOL_TEXT, vocab, used)
    # transitions a -> b with their logit weight
    edges = []
    seq_think = [NL] + think + [151668] + [NLNL]      # "</think>" is one added token
    used.add(151668)
    edges += list(zip(seq_think, seq_think[1:]))
    seq_answer = [NLNL] + answer + [IM_END]
    edges += list(zip(seq_answer, seq_answer[1:]))
    seq_tool = [NLNL] + tool + [IM_END]
    tool_edges = list(zip(seq_tool, seq_tool[1:]))
    chain_tokens = sorted(used)
    assert len(chain_tokens) <= CHAIN_DIMS, len(chain_tokens)
    dim = {t: k for k, t in enumerate(chain_tokens)}

    rng = np.random.default_rng(1234)
    emb = np.zeros((VOCAB, H), np.float32)
    emb[:, CHAIN_DIMS:MARK] = rng.standard_normal((VOCAB, MARK - CHAIN_DIMS), dtype=np.float32)
    emb[:, MARK] = 3.0
    head = np.zeros((VOCAB, H), np.float32)
    head[:, CHAIN_DIMS:MARK] = 0.1 * rng.standard_normal((VOCAB, MARK - CHAIN_DIMS), dtype=np.float32)
    for t in chain_tokens:                  # chain tokens: one-hot in, never reached from random text
        emb[t] = 0
        emb[t, dim[t]] = 1
        head[t] = 0
        head[t, MARK] = -20
    for a, b in edges:
        head[b, dim[a]] = 50
    for a, b in tool_edges:                 # the first step loses to "Hello" (by ~56) unless biased by 100
        head[b, dim[a]] = 45 if a == NLNL else 50

    t = load_file(str(fixtures / "tiny" / "model.safetensors"))
    p = "model.language_model."
    t[p + "embed_tokens.weight"] = emb
    t["lm_head.weight"] = head
    t[p + "norm.weight"] = np.zeros(H, np.float32)  # (1 + w) gain of 1
    for k in list(t):
        if k.startswith(p + "layers.") and k.endswith(("o_proj.weight", "out_proj.weight", "experts.down_proj",
                                                       "shared_expert.down_proj.weight")):
            t[k] = np.zeros_like(t[k])
    save_file(t, str(dst / "model.safetensors"))
    return {"think": think, "answer": answer, "tool": tool, "tool_trigger": tool[0], "chain_tokens": chain_tokens}


if __name__ == "__main__":
    import sys
    root = pathlib.Path(sys.argv[1])
    info = make_chat_model(pathlib.Path("/work/shared/fixtures"), pathlib.Path("/work/shared/reference"), root)
    print(json.dumps(info))
