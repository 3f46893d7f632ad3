/*
 * policy.h — what the privacy gate does with a request, per category of finding: answer locally,
 * forward unchanged upstream, mask (forward with placeholders and restore the answer), skip
 * (refuse the step), or ask the user.
 *
 * Config file (one setting per line, '#' starts a comment, blank lines ignored):
 *     default = mask             # categories not listed
 *     secret = local
 *     private_email = mask       # either spelling: private_email / PRIVATE_EMAIL
 *     min_score = 0.5            # findings below this score are ignored
 * Unknown keys or actions are errors naming the file and line.
 *
 * Deciding for a set of findings: the strictest action of the categories found wins, in the order
 *     skip > local > ask > mask > upstream
 * (an explicit refusal beats keeping data local; keeping it local beats asking; asking beats
 * sending masked; masking beats sending raw). With no finding the request goes upstream.
 */
#ifndef LILAC_POLICY_H
#define LILAC_POLICY_H

#include "privacy/privacy.h"

typedef enum pii_action {
    PII_ACT_UPSTREAM = 0, /* ordered from least to most strict */
    PII_ACT_MASK,
    PII_ACT_ASK,
    PII_ACT_LOCAL,
    PII_ACT_SKIP,
    PII_ACT_N,
} pii_action;

typedef struct pii_policy {
    pii_action action[PII_N_CAT];
    float min_score;
} pii_policy;

const char *pii_action_name(pii_action a); /* "upstream", "mask", "ask", "local", "skip" */
int pii_action_from_name(const char *s);    /* -1 if unknown */

/* Defaults: secret and account_number local (credentials, cards and government IDs never leave),
 * other_pii ask, everything else mask; min_score 0.5. */
void pii_policy_default(pii_policy *p);
/* Parses config text over the current settings of *p (call pii_policy_default first). */
ll_status pii_policy_parse(pii_policy *p, const char *text, size_t n, const char *src);
/* Defaults, then the file at path. */
ll_status pii_policy_load(pii_policy *p, const char *path);

typedef struct pii_decision {
    pii_action action;        /* what to do with the whole request */
    uint32_t categories;      /* bit c: category c was found (score >= min_score) */
    uint32_t mask_categories; /* bit c: found and its action is mask (what to replace when masking) */
    int counts[PII_N_CAT];    /* findings per category */
} pii_decision;

pii_decision pii_policy_decide(const pii_policy *p, const pii_span *spans, size_t n);

#endif
