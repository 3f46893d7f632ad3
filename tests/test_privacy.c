/*
 * test_privacy.c — the privacy gate without a server: validators, rule recognizers (true
 * positives and hard negatives per category), code-point offsets, invalid UTF-8 and MB-sized
 * input, overlap resolution, masking and (streamed, split) unmasking, the policy, and the
 * windowed model scan on the pii-tiny fixture.
 */
#include <math.h>

#include "testutil.h"
#include "privacy/mask.h"
#include "privacy/policy.h"
#include "privacy/scan.h"

#define S(x) x, strlen(x)

static void test_validators(void **st) {
    (void)st;
    assert_true(pii_luhn_ok(S("4539 1488 0343 6467")));
    assert_false(pii_luhn_ok(S("4539 1488 0343 6468")));  /* check digit off by one */
    assert_false(pii_luhn_ok(S("4111 1111 1111 111")));   /* too short for its layout and Luhn */
    assert_false(pii_luhn_ok(S("9999 9999 9999 9995")));  /* no issuer starts with 99 */
    assert_true(pii_iban_ok(S("DE89 3704 0044 0532 0130 00")));
    assert_true(pii_iban_ok(S("GB82WEST12345698765432")));
    assert_false(pii_iban_ok(S("DE89 3704 0044 0532 0130 01")));
    assert_false(pii_iban_ok(S("DE89 3704 0044 0532 0130"))); /* wrong length for DE */
    assert_true(pii_us_ssn_ok(S("536-22-1234")));
    assert_false(pii_us_ssn_ok(S("000-22-1234")));
    assert_false(pii_us_ssn_ok(S("666-22-1234")));
    assert_false(pii_us_ssn_ok(S("912-22-1234")));
    assert_false(pii_us_ssn_ok(S("536-00-1234")));
    assert_true(pii_uk_nino_ok(S("AB 12 34 56 C")));
    assert_false(pii_uk_nino_ok(S("QQ 12 34 56 C")));
    assert_false(pii_uk_nino_ok(S("AB 12 34 56 E")));
    assert_true(pii_es_dni_ok(S("12345678Z")));
    assert_false(pii_es_dni_ok(S("12345678A")));
    assert_true(pii_es_dni_ok(S("X1234567L")));
    assert_true(pii_it_cf_ok(S("RSSMRA85T10A562S")));
    assert_false(pii_it_cf_ok(S("RSSMRA85T10A562T")));
    assert_true(pii_fr_nir_ok(S("1 85 05 78 006 084 91")));
    assert_false(pii_fr_nir_ok(S("1 85 05 78 006 084 92")));
    assert_true(pii_pl_pesel_ok(S("44051401359")));
    assert_false(pii_pl_pesel_ok(S("44051401358")));
    assert_true(pii_br_cpf_ok(S("529.982.247-25")));
    assert_false(pii_br_cpf_ok(S("529.982.247-26")));
    assert_false(pii_br_cpf_ok(S("111.111.111-11")));
    assert_true(pii_cn_rid_ok(S("11010519491231002X")));
    assert_false(pii_cn_rid_ok(S("110105194912310021")));
    assert_true(pii_nl_bsn_ok(S("111222333")));
    assert_false(pii_nl_bsn_ok(S("111222334")));
    assert_true(pii_se_pnr_ok(S("811218-9876")));
    assert_false(pii_se_pnr_ok(S("811218-9877")));
    assert_true(pii_jwt_ok(S("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxIn0.abc")));
    assert_false(pii_jwt_ok(S("eyJub3RoaW5nIjoxfQ.eyJzdWIiOiIxIn0.abc"))); /* header without alg/typ */
    assert_true(pii_private_ipv4(S("10.0.3.17")));
    assert_true(pii_private_ipv4(S("172.20.1.1")));
    assert_true(pii_private_ipv4(S("192.168.0.1")));
    assert_false(pii_private_ipv4(S("172.32.1.1")));
    assert_false(pii_private_ipv4(S("8.8.8.8")));
    assert_false(pii_private_ipv4(S("127.0.0.1")));
    assert_false(pii_private_ipv4(S("10.0.0.256")));
    assert_true(fabs(pii_entropy(S("abcd")) - 2.0) < 1e-9);
    assert_true(pii_entropy(S("aaaa")) == 0.0);
}

/* The first span of `label` found in text, or NULL. */
static int find_label(const pii_spans *s, int label, const char *text, const char *want) {
    for (size_t i = 0; i < s->n; i++) {
        if (s->v[i].label != label) continue;
        size_t n = (size_t)(s->v[i].bend - s->v[i].bstart);
        if (n == strlen(want) && !memcmp(text + s->v[i].bstart, want, n)) return 1;
    }
    return 0;
}

static void expect_span(const char *text, int label, const char *want) {
    pii_spans s = {0};
    assert_int_equal(pii_rules_scan(text, strlen(text), &s), LL_OK);
    if (!find_label(&s, label, text, want)) {
        for (size_t i = 0; i < s.n; i++)
            print_message("  got %s «%.*s»\n", pii_category_name(s.v[i].label), (int)(s.v[i].bend - s.v[i].bstart),
                          text + s.v[i].bstart);
        fail_msg("expected %s «%s» in «%s»", pii_category_name(label), want, text);
    }
    pii_spans_free(&s);
}

static void expect_clean(const char *text) {
    pii_spans s = {0};
    assert_int_equal(pii_rules_scan(text, strlen(text), &s), LL_OK);
    if (s.n) fail_msg("expected nothing in «%s», got %s «%.*s»", text, pii_category_name(s.v[0].label),
                      (int)(s.v[0].bend - s.v[0].bstart), text + s.v[0].bstart);
    pii_spans_free(&s);
}

static void test_true_positives(void **st) {
    (void)st;
    /* e-mail */
    expect_span("write to anna.schmidt@web.de today", PII_EMAIL, "anna.schmidt@web.de");
    expect_span("メールアドレスはhina.kim@yahoo.co.jpです。", PII_EMAIL, "hina.kim@yahoo.co.jp");
    /* phone */
    expect_span("Call me at +49 30 12345678.", PII_PHONE, "+49 30 12345678");
    expect_span("Mon numéro : 06 12 34 56 78", PII_PHONE, "06 12 34 56 78");
    expect_span("My cell is (415) 867-5309, call after 6pm.", PII_PHONE, "(415) 867-5309");
    expect_span("電話番号は090-4237-5646です。", PII_PHONE, "090-4237-5646");
    /* URLs that are private */
    expect_span("see http://wiki.corp.acme.com/people/jsmith.", PII_URL, "http://wiki.corp.acme.com/people/jsmith");
    expect_span("dashboard at http://10.0.3.17:8080/admin)", PII_URL, "http://10.0.3.17:8080/admin");
    expect_span("profile: https://www.linkedin.com/in/anna-schmidt-42", PII_URL, "https://www.linkedin.com/in/anna-schmidt-42");
    expect_span("link https://shop.io/account?email=a%40b.de&token=xyz", PII_URL, "https://shop.io/account?email=a%40b.de&token=xyz");
    /* dates of birth */
    expect_span("I was born on 12 March 1985.", PII_DATE, "12 March 1985");
    expect_span("Geburtsdatum: 03.11.1972", PII_DATE, "03.11.1972");
    expect_span("生年月日は1980年2月11日です。", PII_DATE, "1980年2月11日");
    /* account numbers and national IDs */
    expect_span("Card: 4539 1488 0343 6467, exp 09/27", PII_ACCOUNT, "4539 1488 0343 6467");
    expect_span("IBAN DE89 3704 0044 0532 0130 00 BIC COBADEFFXXX", PII_ACCOUNT, "DE89 3704 0044 0532 0130 00");
    expect_span("SSN 536-22-1234 on file", PII_ACCOUNT, "536-22-1234");
    expect_span("Mi DNI es 12345678Z.", PII_ACCOUNT, "12345678Z");
    expect_span("CPF 529.982.247-25", PII_ACCOUNT, "529.982.247-25");
    expect_span("PESEL: 44051401359", PII_ACCOUNT, "44051401359");
    expect_span("身份证号是11010519491231002X。", PII_ACCOUNT, "11010519491231002X");
    expect_span("Passport number: X4821937", PII_ACCOUNT, "X4821937");
    /* secrets */
    expect_span("key AKIAQ3EGRV7TZ4K9WX2P here", PII_SECRET, "AKIAQ3EGRV7TZ4K9WX2P");
    expect_span("token ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789", PII_SECRET, "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789");
    expect_span("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc", PII_SECRET, "sk_live_4eC39HqLyjWDarjtT1zdp7dc");
    expect_span("db postgres://app:S3cr3tPw9@db1.prod.internal:5432/orders", PII_SECRET,
                "postgres://app:S3cr3tPw9@db1.prod.internal:5432/orders");
    expect_span("Passwort: Sommer2024!xk", PII_SECRET, "Sommer2024!xk");
    expect_span("The wifi password is Falcon611!MdP by the way.", PII_SECRET, "Falcon611!MdP");
    expect_span("Mot de passe : Lune3594@Wqx", PII_SECRET, "Lune3594@Wqx");
    expect_span("auth eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NSJ9.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c ok",
                PII_SECRET, "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NSJ9.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c");
    expect_span("x\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n",
                PII_SECRET, "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----");
    expect_span("export API_TOKEN=Zx8Qw2Lm9Tr4Vb7Np3Ks6Hd1Jf5Gc0Ya", PII_SECRET, "Zx8Qw2Lm9Tr4Vb7Np3Ks6Hd1Jf5Gc0Ya");
    /* addresses */
    expect_span("Ship to 742 Evergreen Terrace, Springfield, IL 62704 please", PII_ADDRESS,
                "742 Evergreen Terrace, Springfield, IL 62704");
    expect_span("Ich wohne in der Hauptstraße 5, 10115 Berlin.", PII_ADDRESS, "Hauptstraße 5, 10115 Berlin");
    expect_span("J'habite au 12 rue de la Paix, 75002 Paris.", PII_ADDRESS, "12 rue de la Paix, 75002 Paris");
    expect_span("Vivo en Calle Mayor 5, 28013 Madrid.", PII_ADDRESS, "Calle Mayor 5, 28013 Madrid");
    /* persons */
    expect_span("Hi, my name is John Smith and I need help.", PII_PERSON, "John Smith");
    expect_span("Sehr geehrter Herr Müller, vielen Dank.", PII_PERSON, "Müller");
    expect_span("Меня зовут Иван Петров, у меня вопрос.", PII_PERSON, "Иван Петров");
    expect_span("我叫王伟，想咨询一下。", PII_PERSON, "王伟");
    /* recall fixes found with bench/privacy_heldout.py: published test cards are cards (the gate
     * cannot tell them from real ones), a fictional-range number with an area code that the text
     * calls a phone, a Japanese form label, and not the tail of a parcel number */
    expect_span("Test card 4111 1111 1111 1111 always succeeds in the sandbox.", PII_ACCOUNT, "4111 1111 1111 1111");
    expect_span("Amex on file: 3714 496353 98431.", PII_ACCOUNT, "3714 496353 98431");
    expect_span("Ship it and text me at (603) 555-0148 tonight.", PII_PHONE, "(603) 555-0148");
    expect_span("担当：佐藤 健\n電話：03-5412-7788", PII_PERSON, "佐藤 健");
    expect_span("Mail k.vogelsang@hansen-soehne.de or p.smith@brightwave.co.uk", PII_EMAIL, "k.vogelsang@hansen-soehne.de");
    expect_clean("Tracking number 1Z 999 AA1 0123 4567 84 was delivered.");
    /* other */
    expect_span("The laptop's MAC address is 3c:22:fb:9a:11:0e.", PII_OTHER, "3c:22:fb:9a:11:0e");
    expect_span("Username: jdoe_1984", PII_OTHER, "jdoe_1984");
}

static void test_hard_negatives(void **st) {
    (void)st;
    expect_clean("Upgrade to version 2.14.3 before Monday; 2.14 had a regression.");
    expect_clean("The commit 3f786850e387550fdab836ed7e6dc881de23001b fixed the build.");
    expect_clean("Request 123e4567-e89b-12d3-a456-426614174000 finished at 2025-03-01T12:30:00Z in 312 ms.");
    expect_clean("The total is $1,234.56 (tax 7% included), order #933154719.");
    expect_clean("Docs: https://docs.python.org/3/library/json.html and https://en.wikipedia.org/wiki/Luhn_algorithm");
    expect_clean("Set OPENAI_API_KEY=your_api_key_here in .env and never commit it.");
    expect_clean("Example: contact user@example.com or call 555-0100 (fictional).");
    expect_clean("api_key = \"sk-xxxxxxxxxxxxxxxxxxxxxxxx\"  # placeholder");
    expect_clean("The release date was 2024-05-17; the next one is 01.09.2025.");
    expect_clean("Server listens on 0.0.0.0:8080; health check at http://localhost:8080/health.");
    expect_clean("Population grew from 3,520,031 to 3,878,100 between 2010 and 2020.");
    expect_clean("The file logo@2x.png is 1200x630 pixels.");
    expect_clean("ISBN 978-3-16-148410-0 is on the back cover.");
    expect_clean("AWS documents AKIAIOSFODNN7EXAMPLE as its example key.");
    expect_clean("Call the function with password=None to use the default.");
    expect_clean("The password is required and must be hashed.");
    expect_clean("Coordinates 48.8584, 2.2945 point to the Eiffel Tower.");
    expect_clean("Hello World! Hi Team, thanks everyone.");
    expect_clean("git clone https://github.com/torvalds/linux.git && cd linux");
    expect_clean("Checksum sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");
    expect_clean("Report bugs to gmp-bugs@gmplib.org or support@acme-tools.io; list: procps@freelists.org.");
    expect_clean("File an issue at https://gitlab.gnome.org/GNOME/glib/issues/new please.");
    /* found on the project's own reference notes while tuning */
    expect_clean("- eos id 248046 and pad id 248055.");
    expect_clean("`tie_word_embeddings=false`, `image_token_id=248056`, `video_token_id=248057`,");
    expect_clean("Decide whether user text may turn into control tokens: llama-server's `parse_special` flag.");
    expect_clean("241.2 tok/s (4.15 ms/token at 128) | vLLM, nvidia/Qwen3-30B-A3B-NVFP4 (FlashInfer)");
}

static void test_codepoint_offsets(void **st) {
    (void)st;
    const char *t = "Grüße 😀 — mail jürgen.müller@web.de!";
    pii_spans s = {0};
    assert_int_equal(pii_rules_scan(t, strlen(t), &s), LL_OK);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.v[0].label, PII_EMAIL);
    /* "Grüße 😀 — mail " is 15 code points; the address is 20 */
    assert_int_equal(s.v[0].start, 15);
    assert_int_equal(s.v[0].end, 15 + 20);
    assert_int_equal(pii_cp_count(t, strlen(t)), 36);
    pii_spans_free(&s);
}

static void test_invalid_utf8(void **st) {
    (void)st;
    /* invalid bytes count one code point each and never stop the scan */
    const char t[] = "\xff\xfe\xc3 bad \xe2\x82 then anna.schmidt@web.de \xed\xa0\x80 end";
    pii_spans s = {0};
    assert_int_equal(pii_rules_scan(t, sizeof(t) - 1, &s), LL_OK);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.v[0].label, PII_EMAIL);
    /* 3 invalid + " bad " (5) + 2 invalid + " then " (6) = 16 */
    assert_int_equal(s.v[0].start, 16);
    assert_int_equal(s.v[0].end, 16 + 19);
    pii_spans_free(&s);
    /* random bytes: any result, but no crash and offsets inside the text */
    uint32_t r = 7;
    char buf[4096];
    for (int rep = 0; rep < 50; rep++) {
        for (size_t i = 0; i < sizeof(buf); i++) {
            r = r * 1103515245u + 12345u;
            buf[i] = (char)(r >> 16);
        }
        assert_int_equal(pii_rules_scan(buf, sizeof(buf), &s), LL_OK);
        int64_t ncp = pii_cp_count(buf, sizeof(buf));
        for (size_t i = 0; i < s.n; i++) {
            assert_true(s.v[i].start >= 0 && s.v[i].start < s.v[i].end && s.v[i].end <= ncp);
            assert_true(s.v[i].bend <= (int64_t)sizeof(buf));
        }
        pii_spans_free(&s);
    }
    /* an empty text */
    assert_int_equal(pii_rules_scan("", 0, &s), LL_OK);
    assert_int_equal(s.n, 0);
}

/* MB-sized input: every planted value is found (the time per MB is reported by
 * bench/privacy_eval, not asserted here). */
static void test_large_input(void **st) {
    (void)st;
    const char *para = "Some ordinary text about release 1.2.3 and https://example.org/docs, nothing else here. ";
    const char *pii = "Reach me at anna.schmidt@web.de or +49 30 12345678. ";
    size_t cap = (1u << 20) + 256, n = 0;
    char *t = malloc(cap);
    int planted = 0;
    while (n + 200 < cap - 256) {
        const char *p = (planted * 7 + (int)(n / 97)) % 5 == 0 ? pii : para;
        size_t l = strlen(p);
        memcpy(t + n, p, l);
        n += l;
        planted += p == pii;
    }
    pii_spans s = {0};
    assert_int_equal(pii_rules_scan(t, n, &s), LL_OK);
    int emails = 0, phones = 0, other = 0;
    for (size_t i = 0; i < s.n; i++) {
        if (s.v[i].label == PII_EMAIL) emails++;
        else if (s.v[i].label == PII_PHONE) phones++;
        else other++;
    }
    print_message("%.2f MiB, %d planted: %d e-mails, %d phones, %d other\n", n / 1048576.0, planted, emails, phones, other);
    assert_true(planted > 100);
    assert_int_equal(emails, planted);
    assert_int_equal(phones, planted);
    assert_int_equal(other, 0);
    pii_spans_free(&s);
    free(t);
}

static void test_resolve_precedence(void **st) {
    (void)st;
    pii_spans s = {0};
    /* same category: united, rule source kept */
    pii_spans_push(&s, (pii_span){0, 0, 10, 20, PII_EMAIL, 0.6f, PII_SRC_MODEL});
    pii_spans_push(&s, (pii_span){0, 0, 15, 30, PII_EMAIL, 0.9f, PII_SRC_RULE});
    /* a secret inside a URL: the secret keeps its bytes, the URL keeps the larger remainder */
    pii_spans_push(&s, (pii_span){0, 0, 40, 80, PII_URL, 0.8f, PII_SRC_RULE});
    pii_spans_push(&s, (pii_span){0, 0, 70, 80, PII_SECRET, 0.9f, PII_SRC_RULE});
    /* a person fully inside an address: dropped */
    pii_spans_push(&s, (pii_span){0, 0, 100, 140, PII_ADDRESS, 0.8f, PII_SRC_RULE});
    pii_spans_push(&s, (pii_span){0, 0, 110, 120, PII_PERSON, 0.8f, PII_SRC_MODEL});
    /* a model span never cuts a rule span, even of a lower-ranked category */
    pii_spans_push(&s, (pii_span){0, 0, 200, 220, PII_EMAIL, 0.9f, PII_SRC_RULE});
    pii_spans_push(&s, (pii_span){0, 0, 210, 230, PII_ACCOUNT, 0.99f, PII_SRC_MODEL});
    assert_int_equal(pii_spans_resolve(&s), LL_OK);
    assert_int_equal(s.n, 6);
    assert_int_equal(s.v[4].label, PII_EMAIL);
    assert_int_equal(s.v[4].bstart, 200);
    assert_int_equal(s.v[4].bend, 220);
    assert_int_equal(s.v[5].label, PII_ACCOUNT);
    assert_int_equal(s.v[5].bstart, 220);
    assert_int_equal(s.v[5].bend, 230);
    assert_int_equal(s.v[0].bstart, 10);
    assert_int_equal(s.v[0].bend, 30);
    assert_int_equal(s.v[0].source, PII_SRC_RULE);
    assert_true(s.v[0].score > 0.89f);
    assert_int_equal(s.v[1].label, PII_URL);
    assert_int_equal(s.v[1].bend, 70);
    assert_int_equal(s.v[2].label, PII_SECRET);
    assert_int_equal(s.v[3].label, PII_ADDRESS);
    for (size_t i = 1; i < s.n; i++) assert_true(s.v[i].bstart >= s.v[i - 1].bend);
    pii_spans_free(&s);
}

static const char *k_mask_text =
    "Mail anna@web.de or bob@gmx.de; again anna@web.de. Key ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789 ok.";

static void mask_fixture(pii_masker *mk, pii_buf *masked) {
    pii_spans s = {0};
    assert_int_equal(pii_rules_scan(k_mask_text, strlen(k_mask_text), &s), LL_OK);
    assert_int_equal(s.n, 4);
    pii_masker_init(mk);
    assert_int_equal(pii_mask_text(mk, k_mask_text, strlen(k_mask_text), s.v, s.n, ~0u, masked), LL_OK);
    pii_spans_free(&s);
}

static void test_mask_roundtrip(void **st) {
    (void)st;
    pii_masker mk;
    pii_buf masked = {0}, back = {0};
    mask_fixture(&mk, &masked);
    assert_string_equal(masked.s, "Mail [PRIVATE_EMAIL_1] or [PRIVATE_EMAIL_2]; again [PRIVATE_EMAIL_1]. Key [SECRET_1] ok.");
    assert_int_equal(mk.n, 3);
    assert_int_equal(pii_unmask_text(&mk, masked.s, masked.n, &back), LL_OK);
    assert_string_equal(back.s, k_mask_text);
    /* a placeholder the masker never issued, and near-misses, pass through unchanged */
    pii_buf_free(&back);
    const char *odd = "[PRIVATE_EMAIL_9] [PRIVATE_EMAIL_1 [SECRET_1]] [] [x] [";
    assert_int_equal(pii_unmask_text(&mk, odd, strlen(odd), &back), LL_OK);
    assert_string_equal(back.s, "[PRIVATE_EMAIL_9] [PRIVATE_EMAIL_1 ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789] [] [x] [");
    /* only selected categories */
    pii_buf_free(&back);
    pii_spans s = {0};
    assert_int_equal(pii_rules_scan(k_mask_text, strlen(k_mask_text), &s), LL_OK);
    assert_int_equal(pii_mask_text(&mk, k_mask_text, strlen(k_mask_text), s.v, s.n, 1u << PII_SECRET, &back), LL_OK);
    assert_non_null(strstr(back.s, "anna@web.de"));
    assert_non_null(strstr(back.s, "[SECRET_1]"));
    pii_spans_free(&s);
    pii_buf_free(&back);
    pii_buf_free(&masked);
    pii_masker_free(&mk);
}

static void stream_unmask(const pii_masker *mk, const char *t, const size_t *cuts, int ncut, pii_buf *out) {
    pii_unmask_stream us;
    pii_unmask_stream_init(&us, mk);
    size_t prev = 0, n = strlen(t);
    for (int i = 0; i <= ncut; i++) {
        size_t c = i < ncut ? cuts[i] : n;
        assert_int_equal(pii_unmask_stream_feed(&us, t + prev, c - prev, out), LL_OK);
        prev = c;
    }
    assert_int_equal(pii_unmask_stream_finish(&us, out), LL_OK);
}

static void test_unmask_stream_split(void **st) {
    (void)st;
    pii_masker mk;
    pii_buf masked = {0};
    mask_fixture(&mk, &masked);
    const char *t = masked.s;
    size_t n = masked.n;
    /* every single cut and every pair of cuts */
    for (size_t a = 0; a <= n; a++) {
        for (size_t b = a; b <= n; b += (a % 3 == 0 ? 1 : 7)) {
            size_t cuts[2] = {a, b};
            pii_buf out = {0};
            stream_unmask(&mk, t, cuts, 2, &out);
            if (strcmp(out.s, k_mask_text)) fail_msg("cuts %zu,%zu: «%s»", a, b, out.s);
            pii_buf_free(&out);
        }
    }
    /* one byte at a time */
    pii_unmask_stream us;
    pii_unmask_stream_init(&us, &mk);
    pii_buf out = {0};
    for (size_t i = 0; i < n; i++) assert_int_equal(pii_unmask_stream_feed(&us, t + i, 1, &out), LL_OK);
    assert_int_equal(pii_unmask_stream_finish(&us, &out), LL_OK);
    assert_string_equal(out.s, k_mask_text);
    pii_buf_free(&out);
    /* a stream ending inside a would-be placeholder gives those bytes back verbatim */
    pii_unmask_stream_init(&us, &mk);
    assert_int_equal(pii_unmask_stream_feed(&us, S("tail [PRIVATE_EM"), &out), LL_OK);
    assert_string_equal(out.s, "tail ");
    assert_int_equal(pii_unmask_stream_finish(&us, &out), LL_OK);
    assert_string_equal(out.s, "tail [PRIVATE_EM");
    pii_buf_free(&out);
    /* a long run of placeholder characters after '[' is released, not held forever */
    pii_unmask_stream_init(&us, &mk);
    assert_int_equal(pii_unmask_stream_feed(&us, S("[AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), &out), LL_OK);
    assert_true(out.n > 40);
    assert_int_equal(pii_unmask_stream_finish(&us, &out), LL_OK);
    pii_buf_free(&out);
    pii_buf_free(&masked);
    pii_masker_free(&mk);
}

static void test_policy(void **st) {
    (void)st;
    pii_policy p;
    pii_policy_default(&p);
    assert_int_equal(p.action[PII_SECRET], PII_ACT_LOCAL);
    assert_int_equal(p.action[PII_EMAIL], PII_ACT_MASK);
    const char *cfg = "# gate\ndefault = upstream\nPRIVATE_EMAIL = mask   # either spelling\nsecret=skip\n\nmin_score = 0.7\n";
    assert_int_equal(pii_policy_parse(&p, cfg, strlen(cfg), "gate.conf"), LL_OK);
    assert_int_equal(p.action[PII_EMAIL], PII_ACT_MASK);
    assert_int_equal(p.action[PII_SECRET], PII_ACT_SKIP);
    assert_int_equal(p.action[PII_PHONE], PII_ACT_UPSTREAM);
    assert_true(fabsf(p.min_score - 0.7f) < 1e-6f);
    pii_span sp[3] = {
        {0, 0, 0, 1, PII_EMAIL, 0.9f, 0}, {0, 0, 2, 3, PII_PHONE, 0.9f, 0}, {0, 0, 4, 5, PII_SECRET, 0.6f, 0}};
    pii_decision d = pii_policy_decide(&p, sp, 3);
    assert_int_equal(d.action, PII_ACT_MASK); /* the secret is below min_score */
    assert_int_equal(d.mask_categories, 1u << PII_EMAIL);
    assert_int_equal(d.categories, (1u << PII_EMAIL) | (1u << PII_PHONE));
    sp[2].score = 0.95f;
    d = pii_policy_decide(&p, sp, 3);
    assert_int_equal(d.action, PII_ACT_SKIP);
    assert_int_equal(d.counts[PII_SECRET], 1);
    d = pii_policy_decide(&p, NULL, 0);
    assert_int_equal(d.action, PII_ACT_UPSTREAM);
    /* errors name the file and line */
    const char *bad = "secret = local\nprivate_emial = mask\n";
    assert_int_equal(pii_policy_parse(&p, bad, strlen(bad), "gate.conf"), LL_ERR_FORMAT);
    assert_non_null(strstr(ll_errmsg(), "gate.conf:2"));
    const char *bad2 = "secret = forward\n";
    assert_int_equal(pii_policy_parse(&p, bad2, strlen(bad2), "g"), LL_ERR_FORMAT);
    assert_non_null(strstr(ll_errmsg(), "forward"));
    const char *d2 = tu_tmpdir();
    char path[256];
    snprintf(path, sizeof(path), "%s/gate.conf", d2);
    tu_write_file(path, cfg, strlen(cfg));
    assert_int_equal(pii_policy_load(&p, path), LL_OK);
    assert_int_equal(p.action[PII_SECRET], PII_ACT_SKIP);
    assert_int_not_equal(pii_policy_load(&p, "/nonexistent/gate.conf"), LL_OK);
}

/* Windowed model scan on pii-tiny (random vocabulary: checked on token ids, one byte per token). */
static void test_model_windows(void **st) {
    (void)st;
    pii_model m;
    if (pii_model_load(&m, tu_shared_path("fixtures/pii-tiny"), NULL, 2)) fail_msg("%s", ll_errmsg());
    st_file g;
    assert_int_equal(st_open(&g, tu_shared_path("fixtures/pii-tiny/golden.safetensors")), LL_OK);
    const ll_tensor *tok = st_find(&g, "case1.tokens"), *tags = st_find(&g, "case1.viterbi_tags");
    const int32_t *ids = tok->data, *gt = tags->data;
    int T = (int)tok->shape[0];
    char *text = malloc((size_t)T);
    int64_t *tb = malloc(sizeof(int64_t) * (size_t)T), *te = malloc(sizeof(int64_t) * (size_t)T);
    for (int i = 0; i < T; i++) { text[i] = 'a'; tb[i] = i; te[i] = i + 1; }
    /* one window: exactly the spans of the golden tags */
    pii_spans s = {0};
    float sens = -1;
    assert_int_equal(pii_model_scan_tokens(&m, text, (size_t)T, ids, tb, te, T, 0, &s, &sens), LL_OK);
    size_t k = 0;
    for (int t = 0; t < T; t++) {
        int kind = pii_tag_kind(gt[t]);
        if (kind != PII_TAG_B && kind != PII_TAG_S) continue;
        int e = t;
        if (kind == PII_TAG_B) while (pii_tag_kind(gt[e]) != PII_TAG_E) e++;
        assert_true(k < s.n);
        assert_int_equal(s.v[k].bstart, t);
        assert_int_equal(s.v[k].bend, e + 1);
        assert_int_equal(s.v[k].label, pii_tag_cat(gt[t]));
        assert_int_equal(s.v[k].source, PII_SRC_MODEL);
        k++;
    }
    assert_int_equal(k, s.n);
    float gl = ((const float *)st_find(&g, "case1.sensitivity_logit")->data)[0];
    assert_true(fabsf(sens - 1.0f / (1.0f + expf(-gl))) < 1e-4f);
    pii_spans_free(&s);
    /* windows of 80 (stride 40): the spans whose middle lies in [0, 60) are those of a forward
     * pass over the first 80 tokens alone */
    assert_int_equal(pii_model_scan_tokens(&m, text, (size_t)T, ids, tb, te, T, 80, &s, &sens), LL_OK);
    pii_spans first = {0};
    assert_int_equal(pii_model_scan_tokens(&m, text, 80, ids, tb, te, 80, 0, &first, NULL), LL_OK);
    size_t nf = 0;
    for (size_t i = 0; i < first.n; i++) {
        if ((first.v[i].bstart + first.v[i].bend - 1) / 2 >= 60) continue;
        assert_true(nf < s.n);
        assert_int_equal(s.v[nf].bstart, first.v[i].bstart);
        assert_int_equal(s.v[nf].bend, first.v[i].bend);
        assert_int_equal(s.v[nf].label, first.v[i].label);
        nf++;
    }
    /* every token of the long input was judged: spans reach the last window's tail */
    int64_t max_end = 0;
    for (size_t i = 0; i < s.n; i++) {
        assert_true(s.v[i].bstart >= 0 && s.v[i].bend <= T);
        if (i) assert_true(s.v[i].bstart >= s.v[i - 1].bend); /* windows never emit a span twice */
        max_end = LL_MAX(max_end, s.v[i].bend);
    }
    assert_true(max_end > T - 20);
    pii_spans_free(&s);
    pii_spans_free(&first);
    free(text);
    free(tb);
    free(te);
    st_close(&g);
    pii_model_free(&m);
}

/* pii_model_scan_text: a byte-level BPE tokenizer whose ids fit pii-tiny's 512-token vocabulary
 * (256 byte tokens + a few merges), so text goes through real tokenization and offset mapping. */
static int put_utf8(char *s, uint32_t cp) {
    if (cp < 0x80) { s[0] = (char)cp; return 1; }
    s[0] = (char)(0xC0 | (cp >> 6));
    s[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

static void test_model_scan_text(void **st) {
    (void)st;
    pii_model m;
    if (pii_model_load(&m, tu_shared_path("fixtures/pii-tiny"), NULL, 2)) fail_msg("%s", ll_errmsg());
    char *toks[300];
    int n = 0, k = 0;
    for (int b = 0; b < 256; b++) { /* GPT-2 byte-to-unicode: printable bytes stand for themselves */
        int keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        char s[4];
        s[put_utf8(s, keep ? (uint32_t)b : (uint32_t)(256 + k++))] = 0;
        toks[n++] = strdup(s);
    }
    const char *extra[] = {"an", "na", "anna", "we", "web", "\xc4\xa0m", "\xc4\xa0ma"}; /* "Ġm" = " m" */
    for (size_t i = 0; i < LL_ARRAY_LEN(extra); i++) toks[n++] = strdup(extra[i]);
    const char *merges[] = {"a n", "n a", "an na", "w e", "we b", "\xc4\xa0 m", "\xc4\xa0m a"};
    tok_spec sp = {.tokens = (const char *const *)toks, .n_tokens = n, .merges = merges, .n_merges = 7,
                   .split_regex = tok_pre_regex("qwen2"), .nfc = 0};
    tok_tokenizer *tok;
    assert_int_equal(tok_build(&sp, &tok), LL_OK);
    const char *text = "Hi anna, \xf0\x9f\x98\x80 mail anna@web.de now \xc3\xa9t\xc3\xa9 ";
    size_t tn = strlen(text);
    pii_spans s = {0};
    float sens = -1;
    assert_int_equal(pii_model_scan_text(&m, tok, text, tn, 0, &s, &sens), LL_OK);
    assert_true(sens >= 0 && sens <= 1);
    print_message("%zu model spans over %zu bytes\n", s.n, tn);
    assert_true(s.n > 0); /* random weights tag nearly everything (see the golden tags) */
    for (size_t i = 0; i < s.n; i++) {
        const pii_span *p = &s.v[i];
        assert_true(p->bstart >= 0 && p->bstart < p->bend && p->bend <= (int64_t)tn);
        /* whole characters, no edge whitespace */
        assert_true(((unsigned char)text[p->bstart] & 0xC0) != 0x80);
        assert_true(p->bend == (int64_t)tn || ((unsigned char)text[p->bend] & 0xC0) != 0x80);
        assert_true(text[p->bstart] != ' ' && text[p->bend - 1] != ' ');
        if (i) assert_true(p->bstart >= s.v[i - 1].bend); /* one character, one span */
    }
    /* the offsets agree with the tokens: same spans as scanning the ids with offsets computed
     * by decoding each token on its own */
    tok_ids ids = {0};
    assert_int_equal(tok_encode(tok, text, tn, TOK_ENC_SPECIAL_AS_TEXT | TOK_ENC_ADDED_AS_TEXT, &ids), LL_OK);
    int64_t *tb = malloc(sizeof(int64_t) * ids.n), *te = malloc(sizeof(int64_t) * ids.n), pos = 0;
    int merged = 0;
    for (size_t i = 0; i < ids.n; i++) {
        tok_str one = {0};
        assert_int_equal(tok_decode(tok, &ids.ids[i], 1, TOK_DEC_RAW, &one), LL_OK);
        assert_memory_equal(one.s, text + pos, one.n);
        merged |= one.n > 1;
        tb[i] = pos;
        pos += (int64_t)one.n;
        te[i] = pos;
        tok_str_free(&one);
    }
    assert_int_equal(pos, (int64_t)tn);
    assert_true(merged);
    pii_spans s2 = {0};
    assert_int_equal(pii_model_scan_tokens(&m, text, tn, ids.ids, tb, te, (int)ids.n, 0, &s2, NULL), LL_OK);
    assert_int_equal(s2.n, s.n);
    for (size_t i = 0; i < s.n; i++) {
        assert_int_equal(s.v[i].bstart, s2.v[i].bstart);
        assert_int_equal(s.v[i].bend, s2.v[i].bend);
    }
    /* and the combined scan resolves rules + model into sorted, disjoint spans with cp offsets */
    pii_spans all = {0};
    assert_int_equal(pii_scan(text, tn, &m, tok, &all, &sens), LL_OK);
    int64_t ncp = pii_cp_count(text, tn);
    for (size_t i = 0; i < all.n; i++) {
        assert_true(all.v[i].start < all.v[i].end && all.v[i].end <= ncp);
        if (i) assert_true(all.v[i].bstart >= all.v[i - 1].bend);
    }
    pii_spans_free(&all);
    pii_spans_free(&s2);
    pii_spans_free(&s);
    free(tb);
    free(te);
    tok_ids_free(&ids);
    tok_free(tok);
    for (int i = 0; i < n; i++) free(toks[i]);
    pii_model_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validators),
        cmocka_unit_test(test_true_positives),
        cmocka_unit_test(test_hard_negatives),
        cmocka_unit_test(test_codepoint_offsets),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_large_input),
        cmocka_unit_test(test_resolve_precedence),
        cmocka_unit_test(test_mask_roundtrip),
        cmocka_unit_test(test_unmask_stream_split),
        cmocka_unit_test(test_policy),
        cmocka_unit_test(test_model_windows),
        cmocka_unit_test(test_model_scan_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
