"""evaluate.py — held-out accuracy of the demonstration model, measured through the lilac binary.

Questions come from corpus.make_test_questions (never in the training set). Plain tasks go through
`lilac run --chat --temp 0` (the engine renders the chat template itself); tool tasks are run in two
raw-prompt steps (the prompt is rendered here with the tools, since `lilac run` takes no tool list):
the model must emit a <tool_call> with the right arguments, and after the tool response its final
answer must hold the right value.

    python3 train/evaluate.py -m models/lilac-demo --per-task 24 [--md bench/results/demo-model.md]
"""
import argparse
import concurrent.futures as cf
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TEST_SEED = 7
STRING_TASKS = ("count", "spell", "reverse", "sort")


def lilac_bin():
    return os.environ.get("LILAC_BIN", os.path.join(ROOT, "build", "lilac"))


EXTRA_ARGS = []  # e.g. ["--tokenizer", DIR] for a GGUF conversion (its tokenizer is read from DIR)


def run_lilac(args, timeout=120):
    p = subprocess.run([lilac_bin(), "run", *args, *EXTRA_ARGS], capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"lilac run failed ({p.returncode}): {p.stderr.strip()[-300:]}")
    return p.stdout, p.stderr


def answer_ok(text, expected):
    """The expected value appears as a whole word/number in the answer text."""
    pat = r"(?<![\w-])" + re.escape(expected) + r"(?![\w]|-\w)"
    return re.search(pat, text) is not None


def ask_chat(model, question, think):
    args = ["-m", model, "--chat", "--temp", "0", "-n", "200", "-p", question, "--quiet"]
    if not think:
        args.append("--no-think")
    out, _ = run_lilac(args)
    return out.strip()


def gen_prompt(think):
    return "<|im_start|>assistant\n<think>\n" + ("" if think else "\n</think>\n\n")


TOOL_RE = re.compile(r"<tool_call>\s*<function=([\w.-]+)>\s*(.*?)</function>\s*</tool_call>", re.S)
PARAM_RE = re.compile(r"<parameter=([\w.-]+)>\n?(.*?)\n?</parameter>", re.S)


def ask_tool(model, item, think):
    """-> (ok, detail): tool call parsed with the right arguments, then the right final answer."""
    msgs = [{"role": "user", "content": item["question"]}]
    text, _ = corpus.render({"messages": msgs, "tools": corpus.TOOLS})
    out, _ = run_lilac(["-m", model, "--temp", "0", "-n", "200", "-p", text + gen_prompt(think), "--quiet"])
    m = TOOL_RE.search(out)
    if not m:
        return False, "no tool call: " + out[-120:]
    args = {k: v.strip() for k, v in PARAM_RE.findall(m.group(2))}
    if m.group(1) != item["tool"] or args != item["arguments"]:
        return False, f"wrong call {m.group(1)}({args})"
    reasoning = out.split("</think>")[0].strip() if think else ""
    call = {"type": "function", "function": {"name": m.group(1), "arguments": args}}
    msgs += [{"role": "assistant", "content": "", "reasoning_content": reasoning, "tool_calls": [call]},
             {"role": "tool", "content": item["tool_result"]}]
    text, _ = corpus.render({"messages": msgs, "tools": corpus.TOOLS})
    out2, _ = run_lilac(["-m", model, "--temp", "0", "-n", "200", "-p", text + gen_prompt(think), "--quiet"])
    final = out2.split("</think>")[-1]
    return answer_ok(final, item["answer"]), final.strip()[-120:]


def evaluate_items(model, items, think=True, workers=2):
    """-> {task: (correct, total, [(question, expected, got)])}"""
    def one(it):
        if it["task"].startswith("tool_"):
            return ask_tool(model, it, think)
        ans = ask_chat(model, it["question"], think)
        return answer_ok(ans, it["answer"]), ans[-120:]
    with cf.ThreadPoolExecutor(workers) as ex:
        outs = list(ex.map(one, items))
    per = {}
    for it, (ok, detail) in zip(items, outs):
        c, n, bad = per.get(it["task"], (0, 0, []))
        if not ok:
            bad = bad + [(it["question"], it["answer"], detail)]
        per[it["task"]] = (c + ok, n + 1, bad)
    return per


def evaluate(model, per_task, modes=(True,), workers=2):
    """-> {mode: {task: (correct, total, [failures])}}"""
    items = corpus.make_test_questions(TEST_SEED, per_task)
    return {("think" if think else "no-think"): evaluate_items(model, items, think, workers) for think in modes}


def markdown(res, model, per_task, seconds):
    lines = ["# lilac-demo: held-out accuracy", "",
             f"Model `{model}`, {per_task} held-out questions per task (train/corpus.py, seed {TEST_SEED}), greedy "
             f"decoding through `lilac run --chat --temp 0` on the CPU backend; tool tasks as two raw-prompt steps "
             f"(tool call with exact arguments, then the final answer after the tool response). "
             f"Measured by `python3 train/evaluate.py` in {seconds:.0f} s.", ""]
    modes = list(res)
    lines.append("| task | " + " | ".join(modes) + " |")
    lines.append("|---|" + "---|" * len(modes))
    for task in res[modes[0]]:
        row = [task]
        for md in modes:
            c, n, _ = res[md][task]
            row.append(f"{c}/{n} ({100 * c / n:.0f} %)")
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    for md in modes:
        bad = [(t, q, a, d) for t, (_, _, b) in res[md].items() for q, a, d in b][:12]
        if bad:
            lines.append(f"Some failures ({md}):")
            lines.append("")
            for t, q, a, d in bad:
                lines.append(f"- {t}: {json.dumps(q)} expected `{a}`, got {json.dumps(d)}")
            lines.append("")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-m", "--model", default=os.path.join(ROOT, "models", "lilac-demo"))
    ap.add_argument("--per-task", type=int, default=24)
    ap.add_argument("--md", help="write the markdown report here")
    ap.add_argument("--modes", default="think,no-think")
    ap.add_argument("--tokenizer", help="tokenizer folder, for a model file without one (GGUF)")
    a = ap.parse_args()
    if a.tokenizer:
        EXTRA_ARGS.extend(["--tokenizer", a.tokenizer])
    modes = tuple(m == "think" for m in a.modes.split(","))
    t0 = time.time()
    res = evaluate(a.model, a.per_task, modes)
    md = markdown(res, os.path.relpath(a.model, ROOT), a.per_task, time.time() - t0)
    print(md)
    if a.md:
        with open(a.md, "w") as f:
            f.write(md)


if __name__ == "__main__":
    main()
