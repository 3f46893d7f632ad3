/*
 * outparse.h — splits the generated text of a Qwen3.5/3.6 model, as it streams, into reasoning
 * (`<think>…</think>`), content, and tool calls written in Qwen's XML form:
 *
 *   <tool_call>
 *   <function=NAME>
 *   <parameter=P>
 *   value (any text, may span lines)
 *   </parameter>
 *   </function>
 *   </tool_call>
 *
 * It is fed text deltas (from the stop matcher) and calls back with events: reasoning deltas,
 * content deltas, and each tool call once it is complete. Text that could be the beginning of a tag
 * is held back until it is resolved, so no event ever carries half a tag.
 *
 * Reasoning. The Qwen3.6 chat template ends the prompt with "<think>\n", so generation starts
 * inside the reasoning: set start_in_reasoning. Otherwise a "<think>" at the very start of the
 * content (only whitespace before it) opens reasoning. "</think>" closes it. Whitespace at the
 * start and end of the reasoning, and at the start of the content after "</think>", is dropped
 * (the template always writes newlines there). If the output ends inside the reasoning, all of it
 * is reasoning. A "</think>" met in content is ordinary content.
 *
 * Tool calls (when parse_tools is set). Parameter values lose one leading and one trailing newline
 * (the template adds them) and are typed by the tool's JSON schema when `tools` gives one, as
 * vLLM's qwen3_coder parser does: a parameter absent from the schema, or of a string-like type, stays
 * a string; "null"/"none" (any case) becomes null for non-string types and for nullable strings;
 * integer types take an integer (written exactly, any length), number types a finite decimal
 * number (written as an integer when it is one), boolean types "true"/"false" (any case), object
 * and array types a JSON text; a value that does not parse as its type stays a string (vLLM turns a
 * bad boolean into false; we keep the text). The schema type is "type" (a string, or an array whose
 * first non-"null" entry counts) or the first non-null "anyOf"/"oneOf" option. Repeated parameter
 * names: the last wins. Arguments are a compact JSON object (cJSON), in parameter order.
 *
 * Robustness (never a crash, never a half-parsed call):
 *   - A value ends at the first "</parameter>", or at an earlier "</function>" + "</tool_call>"
 *     that closes the call without one. A line-initial "<parameter=" inside the value means its
 *     "</parameter>" is missing: the value ends before that line and the next parameter starts.
 *   - A missing "</function>" before "</tool_call>" is tolerated; text after "</function>" that is
 *     not "</tool_call>" ends the call and is content.
 *   - Anything else inside "<tool_call>" (no "<function=", a name with spaces/quotes/braces, junk
 *     between parameters) makes the "<tool_call>" tag and what follows ordinary content.
 *   - If the output ends inside a call: a call whose every parameter is complete is accepted; a
 *     call cut inside an opening tag or a value is returned as content (a truncated argument is never
 *     executed).
 *   - Text between calls is content (whitespace around calls is dropped).
 *   - Known limit: the format has no escaping, so a value cannot contain the text "</parameter>",
 *     "</function></tool_call>" or a line starting with "<parameter=" (vLLM guesses with schema
 *     look-ahead; we do not). Any other text, "<tool_call>" and "</tool_call>" included, is fine.
 * Calls that are not wrapped in <tool_call> are not recognised (content).
 *
 * Not thread-safe; one parser per response.
 */
#ifndef LILAC_OUTPARSE_H
#define LILAC_OUTPARSE_H

#include <cjson/cJSON.h>

#include "base/base.h"

typedef enum ll_out_kind {
    LL_OUT_REASONING = 1,
    LL_OUT_CONTENT,
    LL_OUT_TOOL_CALL,
} ll_out_kind;

typedef struct ll_tool_call {
    int32_t index;   /* 0, 1, ... in order of completion */
    char *name;
    char *arguments; /* JSON object text, e.g. {"city":"Paris","days":3} */
} ll_tool_call;

typedef struct ll_out_event {
    ll_out_kind kind;
    const char *text; /* REASONING / CONTENT: the delta (not NUL-terminated), valid during the call */
    size_t len;
    const ll_tool_call *call; /* TOOL_CALL: valid until the parser is freed */
} ll_out_event;

typedef void (*ll_out_fn)(void *ud, const ll_out_event *ev);

typedef struct ll_outparse_params {
    int start_in_reasoning; /* the prompt ended inside <think> */
    int parse_tools;        /* recognise <tool_call> (else it is content) */
    const cJSON *tools;     /* OpenAI "tools" array, or NULL; copied */
} ll_outparse_params;

typedef struct ll_outparse ll_outparse;

ll_status ll_outparse_new(const ll_outparse_params *p, ll_out_fn fn, void *ud, ll_outparse **out);
void ll_outparse_free(ll_outparse *op);

/* Feeds a text delta; events are delivered from inside this call. */
ll_status ll_outparse_feed(ll_outparse *op, const char *text, size_t len);

/* End of output: resolves everything held back (see "If the output ends inside a call"). Feeding
 * after finish is a programmer error. */
ll_status ll_outparse_finish(ll_outparse *op);

/* The completed calls so far, in order. */
const ll_tool_call *ll_outparse_calls(const ll_outparse *op, int32_t *n);

#endif
