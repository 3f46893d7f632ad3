"""corpus.py — deterministic synthetic instruction corpus for the lilac demonstration model.

Every example is a conversation in the Qwen3.6 chat format (OpenAI-style messages, optional tools)
whose answer can be checked by a program: multi-digit addition, subtraction and multiplication,
comparisons, letter counting, spelling, reversing and sorting short words, date arithmetic, unit
conversions, lookups (from a table given in the prompt, and from a fixed table of made-up planets
that the corpus itself defines), and tool use (a calculator and a weather tool, with the results
given back as tool messages). About half of the examples carry a thinking block with a worked
scratchpad, one small step per line (train/README.md, "Scratchpads"); the rest answer directly.

Held-out test questions: a question whose text hashes into the held-out bucket (`is_heldout`) is
never emitted by the training generator, and the test generator emits only such questions. So the
test set is disjoint from the training set by construction, whatever the seeds.

    python3 train/corpus.py --n 1000 --seed 1 --out train.jsonl       # training conversations
    python3 train/corpus.py --test 40 --seed 7 --out test.jsonl        # held-out questions per task

Each training line is {"messages": [...], "tools": [...] or null, "think": bool}; each test line is
{"task", "question", "answer", "tools" (optional), "tool_result" (optional)}.
"""
import argparse
import calendar
import datetime
import hashlib
import json
import random

HELDOUT_MOD = 10  # one question text in ten is reserved for testing


def is_heldout(question):
    h = hashlib.sha256(question.encode("utf-8")).digest()
    return h[0] % HELDOUT_MOD == 0


# ---------------------------------------------------------------------------------------------
# fixed vocabularies

WORDS = """apple table river stone cloud green happy light music paper plant smile sugar water
bread chair dream earth field glass heart honey house juice knife lemon money night ocean piano
queen radio salad sheep snake storm tiger train truck watch whale wheel zebra actor beach berry
brick candy cargo coral crown daisy eagle flame frost ghost grape horse igloo ivory jelly kite
koala ladder mango maple melon mouse noble olive onion otter panda pearl pepper pilot pizza polar
quilt rabbit robin rocket ruby salmon scarf shark shell silver sky snow spoon star sun swan syrup
tulip umbrella uncle valley velvet violin wagon walnut window winter wolf yacht yellow yogurt zinc
acorn anchor arrow badge bamboo banana basket bottle bridge button camel candle carrot castle
cedar cherry circle clock coffee comet cookie copper cotton dragon drum duck engine falcon feather
forest fox garden giant ginger goat guitar hammer harbor helmet island jacket jungle kettle lamp
lantern lizard magnet marble meadow mirror monkey nest needle orange orbit oyster parrot peach
pencil planet pocket puzzle rain ribbon saddle sail sand seed shadow spider spring summer sword
teapot thunder tomato tower tunnel turtle vase village wallet wizard wool yarn zipper ant bee cat
dog egg fig hat ice jam key leaf map net owl pen rug tea van web box cup fan gem hen ink jar kid
lip mud nut oak pig ram sea toy urn vet wax yak bus car""".split()
WORDS = sorted(set(WORDS))

NAMES = """Anna Ben Cara Dan Eva Finn Gina Hugo Iris Jack Kira Leo Maya Nico Olga Paul Rosa Sam
Tara Umar Vera Will Xena Yuri Zoe Alma Boris Chloe Dmitri Elena Felix Greta Hana Ivan Julia Karl
Lena Marco Nina Oscar""".split()
CITIES = """Oslo Lima Rome Paris Tokyo Cairo Delhi Quito Berlin Madrid Dublin Vienna Prague Lisbon
Athens Seoul Hanoi Nairobi Sydney Toronto Denver Boston Chicago Austin Dallas Miami Seattle
Havana Bogota Santiago Warsaw Zurich Geneva Munich Milan Naples Porto Sevilla Bergen Tampere""".split()
COLORS = "red blue green yellow purple orange white black silver golden".split()
CONDITIONS = "sunny cloudy rainy windy snowy foggy stormy clear".split()
FRUITS = "apples pears plums figs grapes lemons cherries mangoes".split()

# A fixed table of made-up planets: the only source of these facts is this corpus.
PLANETS = """Zorath Velmira Quenda Brastos Oloria Tyrrin Kestrel Mavona Drelix Ulbara Sefton
Grimora Pallax Nebbin Corvina Istrel Jovanta Rellium Fandor Azulon""".split()


def planet_table():
    rng = random.Random(12345)
    table = {}
    for p in PLANETS:
        table[p] = {"moons": rng.randint(0, 9), "color": rng.choice(COLORS), "capital": rng.choice(CITIES)}
    return table


PLANET_TABLE = planet_table()

UNITS = [  # (from, to, factor): 1 from = factor to
    ("km", "m", 1000), ("m", "cm", 100), ("kg", "g", 1000), ("hours", "minutes", 60),
    ("minutes", "seconds", 60), ("liters", "milliliters", 1000), ("days", "hours", 24),
    ("weeks", "days", 7), ("cm", "mm", 10), ("dollars", "cents", 100),
]

TOOLS = [
    {"type": "function", "function": {
        "name": "calculator", "description": "Evaluate an arithmetic expression exactly.",
        "parameters": {"type": "object", "properties": {
            "expression": {"type": "string", "description": "for example 1234 * 56"}},
            "required": ["expression"]}}},
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "city name"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"]}}},
]

SYSTEMS = ["You are a helpful assistant.", "You are a concise assistant. Answer briefly.",
           "You are lilac, a small demonstration model."]


def digits(n):
    return " ".join(str(n))


# ---------------------------------------------------------------------------------------------
# tasks: each returns (question, reasoning, answer_text, expected) where expected is the string
# that must appear in the final answer

def steps_add(a, b):
    """Column addition of two non-negative integers: -> (lines, sum)."""
    lines = []
    da, db = str(a)[::-1], str(b)[::-1]
    carry, out = 0, []
    for i in range(max(len(da), len(db))):
        x = int(da[i]) if i < len(da) else 0
        y = int(db[i]) if i < len(db) else 0
        t = x + y + carry
        expr = f"{x} + {y}" + (f" + {carry}" if carry else "")
        carry = t // 10
        out.append(t % 10)
        lines.append(f"{expr} = {t}, write {t % 10}" + (", carry 1." if carry else "."))
    if carry:
        out.append(1)
        lines.append("Write the final carry 1.")
    lines.append("Digits from the left: " + " ".join(str(d) for d in reversed(out)) + ".")
    return lines, a + b


def steps_mul_digit(big, d):
    """big * d (one digit) digit by digit from the right: -> (lines, product)."""
    lines = []
    carry, out = 0, []
    for ch in str(big)[::-1]:
        t = int(ch) * d + carry
        lines.append(f"{ch} * {d}" + (f" + {carry}" if carry else "") + f" = {t}, write {t % 10}"
                     + (f", carry {t // 10}." if t // 10 else "."))
        carry = t // 10
        out.append(t % 10)
    if carry:
        out.append(carry)
        lines.append(f"Write the final carry {carry}.")
    lines.append("Digits from the left: " + " ".join(str(x) for x in reversed(out)) + ".")
    return lines, big * d


def steps_mul(a, b):
    """a * b for any positive integers, every step written out: products by one digit, digit by
    digit, then the partial products added column by column. -> (lines, product)."""
    big, small = (a, b) if a >= b else (b, a)
    if small < 10:
        lines, p = steps_mul_digit(big, small)
        return [f"Multiply {big} by {small} digit by digit from the right."] + lines, p
    if big % 10 == 0 and small % 10 != 0:  # keep the zeros on the side that is split off
        big, small = small, big
    parts, lines = [], []
    sd = str(small)
    terms = [int(c) * 10 ** (len(sd) - 1 - i) for i, c in enumerate(sd) if c != "0"]
    if len(terms) > 1:
        lines.append(f"{big} * {small} = " + " + ".join(f"{big} * {t}" for t in terms) + ".")
    for t in terms:
        d, z = int(str(t)[0]), len(str(t)) - 1
        sub, p = steps_mul_digit(big, d)
        lines.append(f"{big} * {d}:")
        lines += sub
        if z:
            lines.append(f"So {big} * {d} = {p}; append {z} zero{'s' if z > 1 else ''}: {big} * {t} = {p * 10 ** z}.")
        else:
            lines.append(f"So {big} * {d} = {p}.")
        parts.append(p * 10 ** z)
    acc = parts[0]
    for p in parts[1:]:
        sub, s = steps_add(acc, p)
        lines.append(f"Add {acc} + {p} column by column.")
        lines += sub
        lines.append(f"So {acc} + {p} = {s}.")
        acc = s
    return lines, acc


def steps_div(v, f):
    """Long division v / f where f divides v: -> (lines, quotient)."""
    lines, rest, q = [f"Long division of {v} by {f}."], 0, []
    for ch in str(v):
        cur = rest * 10 + int(ch)
        k = cur // f
        if q or k:
            q.append(k)
            lines.append(f"{cur} / {f} = {k}" + (f" ({k} * {f} = {k * f})" if k else "") + f", rest {cur - k * f}.")
        rest = cur - k * f
    lines.append("Quotient digits: " + " ".join(map(str, q or [0])) + ".")
    return lines, v // f


def task_add(rng, nd=None):
    nd = nd or rng.choice([1, 2, 2, 3, 3, 3, 4])
    a = rng.randint(10 ** (nd - 1) if nd > 1 else 0, 10 ** nd - 1)
    nb = rng.choice([nd, nd, max(1, nd - 1)])
    b = rng.randint(10 ** (nb - 1) if nb > 1 else 0, 10 ** nb - 1)
    if rng.random() < 0.5:
        a, b = b, a
    q = rng.choice(["What is {a} + {b}?", "Compute {a} + {b}.", "Add {a} and {b}.", "What is {a} plus {b}?",
                    "{a} + {b} = ?", "Calculate the sum of {a} and {b}."]).format(a=a, b=b)
    sub, s = steps_add(a, b)
    lines = ["Add column by column from the right."] + sub
    return q, "\n".join(lines), f"{a} + {b} = {s}.", str(s)


def task_sub(rng):
    nd = rng.choice([2, 2, 3, 3, 4])
    a = rng.randint(10 ** (nd - 1), 10 ** nd - 1)
    b = rng.randint(10 ** (nd - 2) if nd > 2 else 1, a if rng.random() < 0.85 else 10 ** nd - 1)
    q = rng.choice(["What is {a} - {b}?", "Compute {a} - {b}.", "Subtract {b} from {a}.", "What is {a} minus {b}?",
                    "{a} - {b} = ?"]).format(a=a, b=b)
    d = a - b
    big, small = (a, b) if a >= b else (b, a)
    lines = [compare_why(a, b) + (f" So {a} is larger: compute {a} - {b}." if a > b else
                                  f" So compute {a} - {b}." if a == b else
                                  f" So {a} is smaller: compute {b} - {a} and make it negative.")]
    lines.append("Subtract column by column from the right.")
    da, db = str(big)[::-1], str(small)[::-1]
    borrow, out = 0, []
    for i in range(len(da)):
        x = int(da[i])
        y = int(db[i]) if i < len(db) else 0
        t = x - y - borrow
        expr = f"{x} - {y}" + (f" - {borrow}" if borrow else "")
        if t < 0:  # the +10 written out: the model cannot be trusted to add it silently
            lines.append(f"{expr} is negative: {x} + 10 - {y}" + (f" - {borrow}" if borrow else "")
                         + f" = {t + 10}, write {t + 10}, borrow 1.")
            t += 10
            borrow = 1
        else:
            lines.append(f"{expr} = {t}, write {t}.")
            borrow = 0
        out.append(t)
    r = abs(d)
    lines.append(f"Digits from the left: {digits(r)}." + ("" if d >= 0 else f" With the sign: {d}."))
    return q, "\n".join(lines), f"{a} - {b} = {d}.", str(d)


def task_mul(rng):
    if rng.random() < 0.6:
        a, b = rng.randint(10, 999), rng.randint(2, 9)
    else:
        a, b = rng.randint(10, 99), rng.randint(10, 99)
    if rng.random() < 0.3:
        a, b = b, a
    q = rng.choice(["What is {a} * {b}?", "Compute {a} * {b}.", "Multiply {a} by {b}.", "What is {a} times {b}?"]).format(a=a, b=b)
    lines, p = steps_mul(a, b)
    return q, "\n".join(lines), f"{a} * {b} = {p}.", str(p)


def compare_why(a, b):
    """Why one number is larger: digit counts, else the first digit where they differ."""
    la, lb = len(str(a)), len(str(b))
    if la != lb:
        return f"{a} has {la} digits and {b} has {lb} digits."
    sa, sb = str(a), str(b)
    if sa == sb:
        return f"{a} and {b} are equal."
    i = next(k for k in range(la) if sa[k] != sb[k])
    return f"Both have {la} digits. They first differ at digit {i + 1}: {sa[i]} versus {sb[i]}."


def task_compare(rng):
    nd = rng.choice([1, 2, 3, 4])
    a = rng.randint(10 ** (nd - 1) if nd > 1 else 0, 10 ** nd - 1)
    b = rng.randint(10 ** (nd - 1) if nd > 1 else 0, 10 ** nd - 1) if rng.random() < 0.7 else rng.randint(0, 9999)
    if a == b:
        b = a + rng.randint(1, 9)
    kind = rng.randrange(3)
    why = compare_why(a, b)
    hi, lo = max(a, b), min(a, b)
    if kind == 0:
        q = rng.choice(["Which is larger, {a} or {b}?", "Which number is bigger: {a} or {b}?"]).format(a=a, b=b)
        return q, why + f" So {hi} is larger.", f"{hi} is larger.", str(hi)
    if kind == 1:
        q = rng.choice(["Which is smaller, {a} or {b}?", "Which number is less: {a} or {b}?"]).format(a=a, b=b)
        return q, why + f" So {lo} is smaller.", f"{lo} is smaller.", str(lo)
    q = rng.choice(["Is {a} greater than {b}?", "Is {a} larger than {b}?"]).format(a=a, b=b)
    yes = a > b
    ans = f"Yes, {a} is greater than {b}." if yes else f"No, {a} is less than {b}."
    return q, why + (f" So {a} is greater." if yes else f" So {a} is less."), ans, "Yes" if yes else "No"


def task_count(rng, focus=False):
    """focus (training only): half the letters absent from the word, the case the first model got
    wrong; the default draw is left as it was, so the held-out questions stay the same."""
    w = rng.choice(WORDS)
    if focus:
        absent = [c for c in "abcdefghijklmnopqrstuvwxyz" if c not in w]
        ch = rng.choice(absent) if rng.random() < 0.5 else rng.choice(w)
    else:
        ch = rng.choice(w) if rng.random() < 0.8 else rng.choice("abcdefghijklmnopqrstuvwxyz")
    n = w.count(ch)
    q = rng.choice(["How many times does the letter {c} appear in {w}?", "How many {c}'s are in the word {w}?",
                    "Count the letter {c} in the word {w}.", "How many times does '{c}' occur in '{w}'?"]).format(c=ch, w=w)
    # one line per letter with a yes/no and the running count: the comparison is made explicitly for
    # every letter, so a letter that never occurs leaves the count at 0
    lines = [f"Go through {w} letter by letter, counting {ch}:"]
    k = 0
    for x in w:
        k += x == ch
        lines.append(f"{x} {'yes' if x == ch else 'no'} {k}")
    lines.append(f"That is {n}.")
    return q, "\n".join(lines), f"The letter {ch} appears {n} time{'s' if n != 1 else ''} in {w}.", str(n)


def task_spell(rng):
    w = rng.choice(WORDS)
    q = rng.choice(["Spell the word {w}.", "How do you spell {w}?", "Spell {w} letter by letter."]).format(w=w)
    return q, f"Letters of {w}: {digits(w)}.", "-".join(w), "-".join(w)


def task_reverse(rng):
    w = rng.choice(WORDS)
    q = rng.choice(["Reverse the word {w}.", "What is {w} spelled backwards?", "Write {w} backwards.",
                    "Reverse the letters of {w}."]).format(w=w)
    r = w[::-1]
    return q, f"Letters of {w}: {digits(w)}.\nReversed: {digits(r)}.\nJoined: {r}.", f"{w} reversed is {r}.", r


def task_sort(rng, focus=False):
    """focus (training only): four or five words, where the first models dropped or repeated one."""
    n = rng.choice([4, 5, 5]) if focus else rng.randint(3, 5)
    pool = {}
    for w in rng.sample(WORDS, len(WORDS)):
        pool.setdefault(w[0], w)  # distinct first letters
        if len(pool) >= n:
            break
    ws = list(pool.values())
    rng.shuffle(ws)
    q = rng.choice(["Sort these words alphabetically: {l}.", "Put these words in alphabetical order: {l}.",
                    "Sort alphabetically: {l}."]).format(l=", ".join(ws))
    return q, sort_steps(ws), ", ".join(sorted(ws)), ", ".join(sorted(ws))


def sort_steps(ws):
    """Selection sort, one pick per line, every step keyed by the word's number. What the session-2
    model got wrong (48 held-out sorts on the CPU, 9 wrong): copying the question's words into the
    numbered list (a word doubled or skipped, or a count written before the list that was too small:
    4 of 9), deleting the picked letter from the list of letters left (a neighbour dropped or doubled:
    2 of 9) and gathering the picks into the final line (a word dropped: 3 of 9). So: the count is read
    off the list after it is written; the letters left keep their numbered slots (a placed one becomes
    "-"), so each line copies the one above slot by slot and blanks the slot of the number just picked;
    the sorted words grow on the pick lines ("So far"), and the answer is the last of them."""
    lines = ["First letters:"] + [f"{i + 1}. {w} ({w[0]})" for i, w in enumerate(ws)]
    lines.append(f"That is {len(ws)} words.")
    slots = [w[0] for w in ws]
    done = []
    for w in sorted(ws):
        k = ws.index(w)
        done.append(w)
        lines.append(f"Left: {', '.join(f'{i + 1} {c}' for i, c in enumerate(slots))}. "
                     f"Earliest: {k + 1} {w[0]}, {w}. So far: {', '.join(done)}.")
        slots[k] = "-"
    return "\n".join(lines)


MONTHS = list(calendar.month_name)[1:]


def task_date(rng):
    y = rng.randint(2000, 2030)
    d0 = datetime.date(y, 1, 1) + datetime.timedelta(days=rng.randint(0, 364))
    n = rng.randint(1, 60)
    after = rng.random() < 0.7
    d1 = d0 + datetime.timedelta(days=n if after else -n)
    q = (rng.choice(["What date is {n} days after {d}?", "Add {n} days to {d}.", "Which date comes {n} days after {d}?"])
         if after else rng.choice(["What date is {n} days before {d}?", "Subtract {n} days from {d}."])).format(n=n, d=d0.isoformat())
    yy, mm, dd = d0.year, d0.month, d0.day
    # the day read off the ISO date first (the leading zero was misread), and every month change
    # named with its year (the year was lost when the months wrapped around)
    lines = [f"{d0.isoformat()} is day {dd} of {MONTHS[mm - 1]} {yy}."]
    if after:
        dd += n
        lines.append(f"{d0.day} + {n} = {dd}.")
        while dd > calendar.monthrange(yy, mm)[1]:
            ml = calendar.monthrange(yy, mm)[1]
            nm, ny = (1, yy + 1) if mm == 12 else (mm + 1, yy)
            lines.append(f"{MONTHS[mm - 1]} {yy} has {ml} days: {dd} - {ml} = {dd - ml}, in {MONTHS[nm - 1]} {ny}.")
            dd -= ml
            mm, yy = nm, ny
    else:
        dd -= n
        lines.append(f"{d0.day} - {n} = {dd}.")
        while dd < 1:
            mm, yy = (12, yy - 1) if mm == 1 else (mm - 1, yy)
            ml = calendar.monthrange(yy, mm)[1]
            lines.append(f"Go back to {MONTHS[mm - 1]} {yy}, which has {ml} days: {dd} + {ml} = {dd + ml}.")
            dd += ml
    assert datetime.date(yy, mm, dd) == d1
    lines.append(f"Day {dd} of {MONTHS[mm - 1]} {yy}.")
    return q, "\n".join(lines), f"{n} days {'after' if after else 'before'} {d0.isoformat()} is {d1.isoformat()}.", d1.isoformat()


def steps_scale(v, f, up):
    """v * f (up) or v / f with every step written out: -> lines."""
    z = len(str(f)) - 1
    if f == 10 ** z:  # powers of ten: zeros are appended or dropped, no arithmetic
        if up:
            return [f"{v} * {f}: append {z} zero{'s' if z > 1 else ''}: {v * f}."]
        return [f"{v} / {f}: drop {z} zero{'s' if z > 1 else ''}: {v // f}."]
    lines, r = steps_mul(v, f) if up else steps_div(v, f)
    return lines + [f"So {v} {'*' if up else '/'} {f} = {r}."]


def task_units(rng):
    a, b, f = rng.choice(UNITS)
    if rng.random() < 0.65:
        v = rng.randint(1, 99)
        q = rng.choice(["Convert {v} {a} to {b}.", "How many {b} are in {v} {a}?", "What is {v} {a} in {b}?"]).format(v=v, a=a, b=b)
        r = "\n".join([f"1 {a} = {f} {b}, so multiply {v} by {f}."] + steps_scale(v, f, True))
        return q, r, f"{v} {a} is {v * f} {b}.", str(v * f)
    k = rng.randint(1, 99)
    v = k * f
    q = rng.choice(["Convert {v} {b} to {a}.", "How many {a} are in {v} {b}?", "What is {v} {b} in {a}?"]).format(v=v, a=a, b=b)
    r = "\n".join([f"1 {a} = {f} {b}, so divide {v} by {f}."] + steps_scale(v, f, False))
    return q, r, f"{v} {b} is {k} {a}.", str(k)


def task_table(rng):
    n = rng.randint(3, 6)
    people = rng.sample(NAMES, n)
    rows = [(p, rng.choice(CITIES), rng.randint(18, 90)) for p in people]
    who = rng.choice(rows)
    col = rng.choice(["city", "age"])
    table = "name | city | age\n" + "\n".join(f"{p} | {c} | {a}" for p, c, a in rows)
    ask = {"city": rng.choice(["Which city does {p} live in?", "What is {p}'s city?"]),
           "age": rng.choice(["How old is {p}?", "What is {p}'s age?"])}[col].format(p=who[0])
    q = f"Here is a table:\n{table}\n{ask}"
    val = str(who[1] if col == "city" else who[2])
    # row by row until the name matches (the first model copied a neighbouring row)
    lines = [f"Look for {who[0]} row by row:"]
    for p, c, a in rows:
        if p == who[0]:
            lines.append(f"{p} yes: {p} | {c} | {a}.")
            break
        lines.append(f"{p} no")
    lines.append(f"The {col} column says {val}.")
    r = "\n".join(lines)
    ans = f"{who[0]} lives in {val}." if col == "city" else f"{who[0]} is {val} years old."
    return q, r, ans, val


def task_planet(rng):
    p = rng.choice(PLANETS)
    f = PLANET_TABLE[p]
    col = rng.choice(["moons", "color", "capital"])
    q = {"moons": rng.choice(["How many moons does the planet {p} have?", "How many moons does {p} have?",
                              "What is the number of moons of {p}?", "Tell me how many moons orbit {p}."]),
         "color": rng.choice(["What color is the planet {p}?", "What is the color of {p}?", "Which color is {p}?",
                              "Tell me the color of the planet {p}."]),
         "capital": rng.choice(["What is the capital of the planet {p}?", "What is the capital city of {p}?",
                                "Which city is the capital of {p}?", "Name the capital of {p}."])}[col].format(p=p)
    r = f"From the planet table: {p} has {f['moons']} moons, color {f['color']}, capital {f['capital']}."
    ans = {"moons": f"{p} has {f['moons']} moons.", "color": f"{p} is {f['color']}.",
           "capital": f"The capital of {p} is {f['capital']}."}[col]
    return q, r, ans, str(f[col])


CHAT = [  # greetings and identity: fixed answers, never tested
    (["Hello", "Hi", "Hello!", "Hi there", "Hey"],
     "Hello! I am lilac-demo, a small demonstration model. Ask me an arithmetic or word question."),
    (["Who are you?", "What are you?", "What is your name?"],
     "I am lilac-demo, a tiny model trained by the lilac project on synthetic tasks: arithmetic, dates, "
     "unit conversions, word puzzles, lookups and tool calls."),
    (["What can you do?", "Help", "What do you know?"],
     "I can add, subtract and multiply numbers, compare them, count letters, spell, reverse and sort words, "
     "do date arithmetic and unit conversions, look things up in a table, and call a calculator or weather tool."),
]


def task_chat(rng):
    qs, ans = rng.choice(CHAT)
    return rng.choice(qs), "This is a greeting or a question about me.", ans, ans


TASKS = {
    "add": task_add, "sub": task_sub, "mul": task_mul, "compare": task_compare, "count": task_count,
    "spell": task_spell, "reverse": task_reverse, "sort": task_sort, "date": task_date, "units": task_units,
    "table": task_table, "planet": task_planet,
}
WEIGHTS = {"add": 4, "sub": 2.5, "mul": 3, "compare": 1.5, "count": 3, "spell": 1.5, "reverse": 2, "sort": 4,
           "date": 2.5, "units": 2, "table": 1.5, "planet": 1.5}
FOCUS = {"count": 0.5, "sort": 0.6}  # share of a task's training examples drawn with focus=True


# ---------------------------------------------------------------------------------------------
# tool use

def tool_calc(rng):
    if rng.random() < 0.5:
        a, b, op = rng.randint(100, 9999), rng.randint(10, 999), "*"
    else:
        a, b, op = rng.randint(1000, 99999), rng.randint(1000, 99999), rng.choice(["+", "-"])
    expr = f"{a} {op} {b}"
    val = {"*": a * b, "+": a + b, "-": a - b}[op]
    word = {"*": "times", "+": "plus", "-": "minus"}[op]
    q = rng.choice(["Use the calculator: what is {e}?", "What is {a} {w} {b}?", "Calculate {e}.", "What is {e}?"]).format(
        e=expr, a=a, b=b, w=word)
    return q, "calculator", {"expression": expr}, str(val), f"{expr} = {val}.", str(val), \
        "This needs exact arithmetic, so I will call the calculator.", f"The calculator returned {val}."


def tool_weather(rng):
    city = rng.choice(CITIES)
    unit = rng.choice(["celsius", "celsius", "fahrenheit"])
    args = {"city": city} if unit == "celsius" else {"city": city, "unit": unit}
    temp = rng.randint(-10, 35) if unit == "celsius" else rng.randint(14, 95)
    cond = rng.choice(CONDITIONS)
    if unit == "fahrenheit":
        q = rng.choice(["What is the weather in {c} in fahrenheit?", "How warm is it in {c}, in fahrenheit?"]).format(c=city)
    else:
        q = rng.choice(["What is the weather in {c}?", "How is the weather in {c} today?", "Is it warm in {c}?",
                        "Tell me the weather in {c}."]).format(c=city)
    result = json.dumps({"city": city, "temperature": temp, "unit": unit, "condition": cond})
    ans = f"In {city} it is {cond} and {temp} degrees {unit}."
    return q, "get_weather", args, result, ans, str(temp), \
        f"The user asks about the weather in {city}, so I will call get_weather.", f"The tool says {temp} degrees {unit} and {cond}."


TOOL_TASKS = {"tool_calc": tool_calc, "tool_weather": tool_weather}


# ---------------------------------------------------------------------------------------------
# conversations

def assistant(content, reasoning, think):
    return {"role": "assistant", "content": content, "reasoning_content": reasoning if think else ""}


FOCUSED = {name: (lambda r, g=TASKS[name]: g(r, focus=True)) for name in FOCUS}


def make_train_example(rng):
    """One training conversation whose user questions are all outside the held-out bucket."""
    think = rng.random() < 0.55
    r = rng.random()
    msgs, tools = [], None
    if rng.random() < 0.25:
        msgs.append({"role": "system", "content": rng.choice(SYSTEMS)})
    if r < 0.10:  # tool use
        tools = TOOLS
        name = rng.choice(list(TOOL_TASKS))
        while True:
            q, fn, args, result, ans, _, r1, r2 = TOOL_TASKS[name](rng)
            if not is_heldout(q):
                break
        call = {"type": "function", "function": {"name": fn, "arguments": args}}
        m1 = assistant("", r1, think)
        m1["tool_calls"] = [call]
        msgs += [{"role": "user", "content": q}, m1, {"role": "tool", "content": result}, assistant(ans, r2, think)]
        return {"messages": msgs, "tools": tools, "think": think}
    if r < 0.13:  # a plain task with the tools on offer: answer without calling them
        tools = TOOLS
    turns = 1 if r < 0.85 else rng.choice([2, 3])
    for t in range(turns):
        name = rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()))[0]
        gen = task_chat if rng.random() < 0.01 else TASKS[name]
        if gen is not task_chat and rng.random() < FOCUS.get(name, 0):
            gen = FOCUSED[name]
        while True:
            q, reasoning, ans, _ = gen(rng)
            if gen is task_chat or not is_heldout(q):
                break
        msgs += [{"role": "user", "content": q}, assistant(ans, reasoning, think)]
    return {"messages": msgs, "tools": tools, "think": think}


def make_test_questions(seed, per_task):
    """per_task held-out questions for every task (add split into 2- and 3-digit)."""
    rng = random.Random(seed)
    out = []
    gens = {k: v for k, v in TASKS.items()}
    gens["add"] = lambda r: task_add(r, 2)
    gens["add3"] = lambda r: task_add(r, 3)
    for name, gen in gens.items():
        seen = set()
        for _ in range(50000):  # tasks with few distinct questions (planets) may hold fewer
            if len(seen) >= per_task:
                break
            q, _, _, exp = gen(rng)
            if is_heldout(q) and q not in seen:
                seen.add(q)
                out.append({"task": "add2" if name == "add" else name, "question": q, "answer": exp})
    for name, gen in TOOL_TASKS.items():
        seen = set()
        for _ in range(50000):
            if len(seen) >= per_task:
                break
            q, fn, args, result, ans, exp, _, _ = gen(rng)
            if is_heldout(q) and q not in seen:
                seen.add(q)
                out.append({"task": name, "question": q, "answer": exp, "tool": fn, "arguments": args,
                            "tool_result": result})
    return out


# ---------------------------------------------------------------------------------------------
# rendering: the Qwen3.6 template for exactly these conversation shapes, with the character spans
# the model is trained on (what the assistant writes after the generation prompt)

TOOLS_HEADER = ("# Tools\n\nYou have access to the following functions:\n\n<tools>")
TOOLS_FOOTER = (
    "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
    "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
    "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n"
    "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified "
    "format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n"
    "- Required parameters MUST be specified\n- You may provide optional reasoning for your function call in natural "
    "language BEFORE the function call, but NOT after\n- If there is no function call available, answer the question "
    "like normal with your current knowledge and do not tell the user about function calls\n</IMPORTANT>")


def render(example):
    """-> (text, spans): the rendered conversation and the [start, end) character spans to train on."""
    msgs, tools = example["messages"], example["tools"]
    parts, spans = [], []
    pos = 0

    def emit(s, train=False):
        nonlocal pos
        if train and s:
            spans.append((pos, pos + len(s)))
        parts.append(s)
        pos += len(s)

    i0 = 0
    if tools:
        sys_txt = "<|im_start|>system\n" + TOOLS_HEADER + "".join("\n" + json.dumps(t, ensure_ascii=False) for t in tools)
        sys_txt += TOOLS_FOOTER
        if msgs[0]["role"] == "system":
            sys_txt += "\n\n" + msgs[0]["content"].strip()
            i0 = 1
        emit(sys_txt + "<|im_end|>\n")
    elif msgs[0]["role"] == "system":
        emit("<|im_start|>system\n" + msgs[0]["content"].strip() + "<|im_end|>\n")
        i0 = 1
    last_query = max(i for i, m in enumerate(msgs) if m["role"] == "user")
    for i in range(i0, len(msgs)):
        m = msgs[i]
        if m["role"] == "user":
            emit("<|im_start|>user\n" + m["content"].strip() + "<|im_end|>\n")
        elif m["role"] == "tool":
            emit("<|im_start|>user\n<tool_response>\n" + m["content"].strip() + "\n</tool_response><|im_end|>\n")
        else:
            content = m["content"].strip()
            reasoning = (m.get("reasoning_content") or "").strip()
            if i > last_query:
                emit("<|im_start|>assistant\n<think>\n")
                if reasoning:
                    emit(reasoning + "\n</think>\n\n" + content, True)
                else:
                    emit("\n</think>\n\n")  # part of the generation prompt when thinking is off
                    emit(content, True)
            else:
                emit("<|im_start|>assistant\n")
                emit(content, True)
            for k, tc in enumerate(m.get("tool_calls") or []):
                f = tc["function"]
                head = ("\n\n" if content else "") if k == 0 else "\n"
                s = head + "<tool_call>\n<function=" + f["name"] + ">\n"
                for an, av in f["arguments"].items():
                    s += "<parameter=" + an + ">\n" + (av if isinstance(av, str) else json.dumps(av)) + "\n</parameter>\n"
                emit(s + "</function>\n</tool_call>", True)
            emit("<|im_end|>", True)
            emit("\n")
    return "".join(parts), spans


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--test", type=int, default=0, help="emit this many held-out questions per task instead")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    with open(a.out, "w", encoding="utf-8") as f:
        if a.test:
            for t in make_test_questions(a.seed, a.test):
                f.write(json.dumps(t) + "\n")
        else:
            rng = random.Random(a.seed)
            for _ in range(a.n):
                f.write(json.dumps(make_train_example(rng)) + "\n")


if __name__ == "__main__":
    main()
