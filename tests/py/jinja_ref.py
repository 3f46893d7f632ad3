"""The reference renderer for chat templates: Jinja2 set up as transformers' apply_chat_template sets
it up (sandbox, trim_blocks, lstrip_blocks, loopcontrols, tojson as json.dumps(ensure_ascii=False),
raise_exception). Used to generate and re-check tests/data/template_cases.json."""
import json

CASES = [
    # (name, template, variables)
    ("ws-trim-lstrip", "A\n  {% if true %}\n  B\n  {% endif %}\nC\n", {}),
    ("ws-minus", "A  {%- if true -%}  B  {%- endif -%}  C", {}),
    ("ws-plus", "A\n  {%+ if true +%}\nB\n{% endif %}\n", {}),
    ("ws-var-no-trim", "{{ 'x' }}\n{{ 'y' }}\n", {}),
    ("ws-comment", "a\n  {# c #}\nb {#- c -#} d", {}),
    ("ws-inline-block", "x {% if true %}y{% endif %} z\n", {}),
    ("for-loop-vars", "{% for x in xs %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }};{% endfor %}", {"xs": [1, 2, 3]}),
    ("for-prev-next", "{% for x in xs %}[{{ loop.previtem }}|{{ loop.nextitem }}]{% endfor %}", {"xs": ["a", "b", "c"]}),
    ("for-else", "{% for x in xs %}{{ x }}{% else %}empty{% endfor %}", {"xs": []}),
    ("for-filter", "{% for x in xs if x > 1 %}{{ x }}{{ loop.index }},{% endfor %}", {"xs": [1, 2, 3, 4]}),
    ("for-unpack-items", "{% for k, v in d|items %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}", {"d": {"b": 1, "a": [1, 2]}}),
    ("for-break-continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("for-scope", "{% set y = 1 %}{% for x in [1,2] %}{% set y = y + x %}{{ y }}{% endfor %}|{{ y }}", {}),
    ("nested-loops", "{% for a in [1,2] %}{% for b in 'xy' %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}|{% endfor %}", {}),
    ("namespace", "{% set ns = namespace(n=0, s='') %}{% for x in [1,2,3] %}{% set ns.n = ns.n + x %}{% set ns.s = ns.s ~ x %}{% endfor %}{{ ns.n }} {{ ns.s }}", {}),
    ("macro-defaults", "{% macro f(a, b=2, c='z') %}{{ a }}-{{ b }}-{{ c }}{% endmacro %}{{ f(1) }} {{ f(1, 3) }} {{ f(1, c='q') }} {{ f(a=5)|length }}", {}),
    ("set-block", "{% set x %}hello {{ 'w' }}{% endset %}[{{ x }}]", {}),
    ("set-tuple", "{% set a, b = 1, 'two' %}{{ a }}{{ b }}", {}),
    ("filters-basic", "{{ 'Ab C'|lower }} {{ 'ab'|upper }} {{ '  x  '|trim }}| {{ [3,1,2]|length }} {{ 'héllo'|length }} {{ [1,2]|first }} {{ [1,2]|last }} {{ 'abc'|list }} {{ [1,2,3]|reverse|list }} {{ 'abc'|reverse }}", {}),
    ("filters-join-default", "{{ ['a','b']|join(', ') }} {{ [1,2]|join }} {{ undefined_var|default('dflt') }} {{ ''|default('e', true) }} {{ none|default('n') }}", {}),
    ("filters-numbers", "{{ '42'|int + 1 }} {{ '3.5'|float }} {{ -3|abs }} {{ 'x'|int }} {{ 2.0|int }} {{ 7|string ~ 'a' }}", {}),
    ("filters-string", "{{ true|string }} {{ none|string }} {{ 1.5|string }} {{ [1,'a',none,true]|string }} {{ {'k': 'v', 'n': 1.0}|string }}", {}),
    ("filters-replace-title", "{{ 'a-b-c'|replace('-', '+') }} {{ 'a-b-c'|replace('-', '', 1) }} {{ 'hello world'|title }} {{ 'hello World'|capitalize }}", {}),
    ("filters-map-select", "{{ ms|map(attribute='role')|join(',') }} {{ ms|selectattr('role', 'equalto', 'user')|list|length }} {{ ms|rejectattr('role', 'equalto', 'user')|map(attribute='content')|join }}", {"ms": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}),
    ("tojson", "{{ d|tojson }}\n{{ d|tojson(indent=2) }}\n{{ 'é\"\\\\\n\t\u0001'|tojson }} {{ [1.5, 0.1, 1e20, 1e-7, 100.0, -0.0]|tojson }} {{ none|tojson }} {{ {}|tojson }} {{ []|tojson }}", {"d": {"a": [1, {"b": None, "c": True}], "ü": "ß", "x": 2.5}}),
    ("tests", "{{ x is string }} {{ x is mapping }} {{ l is sequence }} {{ l is iterable }} {{ u is defined }} {{ u is undefined }} {{ n is none }} {{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ t is true }} {{ t is false }} {{ 1 is number }} {{ true is boolean }} {{ 1.0 is float }} {{ 1 is integer }} {{ x is not string }} {{ 'a' is in 'cat' }} {{ 2 is eq 2 }}", {"x": "s", "l": [1], "n": None, "t": True}),
    ("string-methods", "{{ 'a,b,,c'.split(',') }} {{ '  a b \n c '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ 'xxhixx'.strip('x') }} {{ '\n\nhi\n'.lstrip('\n') }}|{{ 'hi  '.rstrip() }}| {{ 'hello'.startswith('he') }} {{ 'hello'.endswith(('x', 'lo')) }} {{ 'hello'.find('l') }} {{ 'hello'.count('l') }} {{ 'a b'.upper() }} {{ ', '.join(['x', 'y']) }} {{ 'a-b'.replace('-', '--') }}", {}),
    ("think-split", "{% set c = '<think>\nR\n</think>\n\nA' %}{{ c.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') }}|{{ c.split('</think>')[-1].lstrip('\n') }}", {}),
    ("slicing", "{{ l[::-1] }} {{ l[1:] }} {{ l[-2:] }} {{ l[:1] }} {{ l[::2] }} {{ l[5:] }} {{ s[1:3] }} {{ s[::-1] }} {{ s[-1] }} {{ l[-1] }} {{ l[10] is undefined }}", {"l": [1, 2, 3, 4], "s": "añb€"}),
    ("arith", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 0.1 + 0.2 }} {{ 1 / 3 }} {{ 1e20 * 10 }} {{ 3 - 5 }} {{ 2 * 3.0 }} {{ 'ab' * 3 }} {{ 1 + true }} {{ 10 / 4 * 2 }} {{ 1e16 }} {{ 123456789.0 }} {{ 0.0001 }} {{ 0.00001 }}", {}),
    ("compare-logic", "{{ 1 < 2 < 3 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ [1] == [1] }} {{ 1 != 2 }} {{ 0 or 'x' }} {{ 'a' and 'b' }} {{ not 0 }} {{ 'a' in ['a'] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} {{ none == none }}", {}),
    ("concat-tilde", "{{ 'a' ~ 1 ~ none ~ true ~ undef ~ [1] }}", {}),
    ("cond-expr", "{{ 'y' if true else 'n' }} {{ 'y' if false else 'n' }} [{{ 'y' if false }}] {{ 1 if 0 else 2 if 0 else 3 }}", {}),
    ("dict-access", "{{ d.a }} {{ d['a'] }} {{ d.missing is undefined }} {{ d.get('a') }} {{ d.get('zz', 'dflt') }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }}", {"d": {"a": 1, "b": "two"}}),
    ("print-types", "{{ none }} {{ true }} {{ 1.0 }} {{ [1, 'it''s', \"q\"] }} {{ {'a': [none]} }} {{ undef }}|", {}),
    ("string-escapes", "{{ 'tab\\there' }} {{ \"quote\\\"s\" }} {{ 'uni\\u00e9' }} {{ 'a' 'b' }}", {}),
    ("list-concat", "{{ [1] + [2, 3] }} {{ ([1, 2] + [3])|length }} {{ (1, 2) }}", {}),
    ("range", "{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(3, 0, -1)|list }}", {}),
    ("loop-in-macro", "{% macro r(items) %}{% for i in items %}<{{ i }}>{% endfor %}{% endmacro %}{{ r([1, 2]) }}{{ r('ab')|upper }}", {}),
    ("if-elif", "{% for x in [1, 2, 3, 4] %}{% if x == 1 %}one{% elif x == 2 %}two{% elif x == 3 %}three{% else %}other{% endif %},{% endfor %}", {}),
    ("raise", "{% if true %}{{ raise_exception('Custom failure: ' ~ 3) }}{% endif %}", {}),
    ("generation", "{% generation %}gen {{ 1 }}{% endgeneration %}", {}),
    ("unicode-trim", "[{{ '\u3000\u00a0 x \u2028'|trim }}] {{ 'a\u3000b'.split() }}", {}),
    ("trailing-newline", "x\n", {}),
    ("crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc", {}),
]


def make_env():
    import jinja2
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    class AssistantTracker(jinja2.ext.Extension):
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

        def _render(self, caller):
            return caller()

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def render(source, variables):
    """Returns ("ok", text) or ("error", message)."""
    import jinja2
    env = make_env()
    try:
        return "ok", env.from_string(source).render(**variables)
    except jinja2.exceptions.TemplateError as e:
        return "error", str(e)
