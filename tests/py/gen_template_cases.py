"""Regenerates tests/data/template_cases.json (expected renderings by the reference Jinja2 set-up in
jinja_ref.py):  python3 tests/py/gen_template_cases.py"""
import json, os, sys

sys.path.insert(0, os.path.dirname(__file__))
from jinja_ref import CASES, render  # noqa: E402

out = []
for name, src, variables in CASES:
    kind, text = render(src, variables)
    out.append({"name": name, "template": src, "vars": variables, kind if kind == "error" else "rendered": text})
path = os.path.join(os.path.dirname(__file__), "..", "data", "template_cases.json")
json.dump(out, open(path, "w", encoding="utf-8"), ensure_ascii=False, indent=1)
print(path, len(out), "cases")
