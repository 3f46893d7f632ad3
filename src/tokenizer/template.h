/*
 * template.h — chat templates: an interpreter for the Jinja subset that HF chat templates use,
 * rendering exactly as transformers' apply_chat_template does (Jinja2 sandbox with
 * trim_blocks=True, lstrip_blocks=True, loopcontrols; `raise_exception`, `tojson` as json.dumps
 * with ensure_ascii=False, `strftime_now`, `namespace`, `range`).
 *
 * Supported: {{ }}, {% if/elif/else %}, {% for a[, b] in x [if c] %} with loop.* and {% else %},
 * {% set %} (names, ns.attr, tuples, block set), {% macro %} with defaults, {% break/continue %},
 * {% generation %}, comments, whitespace control (-, +); expressions with Python semantics for
 * str/int/float/bool/None/list/dict (slices, `in`, `~`, conditional expressions, str methods such as
 * split/strip/startswith, dict items/keys/get), the usual filters and tests. Anything else is
 * refused at parse time (or at run time for unknown filters/tests/methods) with an error naming
 * the construct and its line.
 *
 * Known limits: JSON numbers that are whole (3.0) become ints, as cJSON keeps no distinction;
 * Python's splitlines-style newline normalisation of the template source is limited to \r\n and \r.
 */
#ifndef LILAC_TEMPLATE_H
#define LILAC_TEMPLATE_H

#include <stddef.h>

#include "base/base.h"

typedef struct cJSON cJSON;
typedef struct tmpl tmpl;

/* Parses template source. `name` (a file name) prefixes error messages. */
ll_status tmpl_parse(const char *src, size_t len, const char *name, tmpl **out);
void tmpl_free(tmpl *t);

/* Renders for an OpenAI-style chat request:
 *   messages               (required) list of {role, content (string or list of parts), ...}
 *   tools                  optional list (None when absent, as transformers passes it)
 *   add_generation_prompt  optional bool, default true
 *   chat_template_kwargs   optional object; each key becomes a template variable
 *                          (enable_thinking, preserve_thinking, ...)
 * `vars` (optional object) adds more variables, e.g. bos_token / eos_token from the tokenizer.
 * On success *out is an ll_malloc'd NUL-terminated string of *out_len bytes. When the template
 * calls raise_exception(msg), the status is LL_ERR_INVALID and ll_errmsg() is exactly msg (so a
 * server can show the template's own words); other errors name the template line. */
ll_status tmpl_render(const tmpl *t, const cJSON *request, const cJSON *vars, char **out, size_t *out_len);

/* OpenAI clients send tool_calls[].function.arguments as a JSON *string*; the Qwen3.5/3.6 templates
 * iterate it as a mapping (`arguments|items`) and fail on a string, so servers (vLLM, llama.cpp)
 * parse it first. This does that in place: every such string that parses as a JSON object becomes
 * that object. Returns how many were converted. (Leave requests for the Qwen3 template alone if
 * byte-exactness with a string-argument transformers call matters: it prints strings verbatim.) */
int tmpl_normalize_tool_args(cJSON *request);

#endif
