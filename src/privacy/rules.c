/*
 * rules.c — rule recognizers for the nine PII categories: PCRE2 candidate patterns (UTF + UCP,
 * JIT-compiled once, match and depth limits set) followed by a check function per rule that
 * validates the candidate (checksums, structure, known key formats, entropy) and looks for
 * context words around it.
 *
 * Tuning for clean text (FP0): version numbers, hashes (hex-only strings), UUIDs, timestamps,
 * prices, public URLs and example placeholders (example.com, "your_api_key", "xxxx", <TOKEN>)
 * are rejected; digits without structure need a context word; dates count as private only next
 * to a birth/death word.
 *
 * Patterns are written so that no quantified group can match the same text two ways (bounded
 * repeats of disjoint classes), and the match limits bound the work anyway: a limit hit skips
 * one code point of the subject and the scan continues, so no input can stall a scan.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <ctype.h>
#include <pcre2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "privacy/privacy.h"

typedef struct scan_ctx {
    const char *s; /* sanitized text (valid UTF-8) */
    size_t n;
    pcre2_match_data *md;
    pcre2_match_context *mc;
} scan_ctx;

/* A check adjusts the span [*b, *e) (bytes) and its score; returns 0 to reject the candidate. */
typedef int (*rule_check)(const scan_ctx *c, size_t *b, size_t *e, float *score);

typedef struct rule_def {
    int cat;
    int group; /* capture group that is the span (0: whole match) */
    float score;
    rule_check check; /* NULL: accept */
    const char *pat;
    /* Prefilter: '|'-separated literals of which the text must contain one for the rule to run
     * at all (NULL: always run). Most texts hold no "-----BEGIN " or "ghp_", and skipping a
     * rule is cheaper than a JIT pass over the whole text. */
    const char *need;
} rule_def;

/* ---- context words (caseless, matched as plain alternations) ---- */

enum { CTX_PHONE, CTX_BIRTH, CTX_ACCOUNT, CTX_SECRET, CTX_CARD, CTX_IP, CTX_USER, CTX_PESEL, CTX_BSN, CTX_IMEI, CTX_N };

static const char *const k_ctx_pat[CTX_N] = {
    [CTX_PHONE] = "phone|\\btel\\b|tel\\.|\\bcall\\b|mobile|\\bcell|\\bfax\\b|whatsapp|\\bsms\\b|text me|hotline|"
                  "telefon|handy|rufnummer|t[ée]l[ée]phone|portable|appele|tel[ée]fono|m[óo]vil|llam|llám|dzwo|cellulare|chiam|"
                  "telefoon|mobiel|\\bbel\\b|telefone|celular|ligue|телефон|тел\\.|моб|звон|電話|携帯|电话|手机|"
                  "전화|휴대폰|puhelin|\\btlf|numer tel|telefonnummer|mobilnummer",
    [CTX_BIRTH] = "\\bborn\\b|birth|\\bdob\\b|d\\.o\\.b|birthday|\\bdied\\b|death|passed away|geboren|geburt|"
                  "\\bné\\b|\\bnée\\b|naissance|anniversaire|\\bnac[ií]|nasc|cumpleaños|\\bnat[oa]\\b|nascit|"
                  "compleanno|geboorte|nascid|nascimento|aniversário|родил|рожден|生年月日|誕生日|生まれ|出生|生日|"
                  "생년월일|생일|태어|urodz|född|födelse|syntynyt|doğum|verstorben|décédé|falleci|deceduto",
    [CTX_ACCOUNT] = "account|\\bacct|a/c|konto|\\bcompte|cuenta|\\bconto\\b|rekening|\\bconta\\b|сч[её]т|口座|账户|账号|帳號|계좌|"
                    "passport|pasaporte|passeport|reisepass|passaporto|paspoort|паспорт|旅券|护照|여권|"
                    "licen[cs]e|führerschein|permis|licencia|patente|rijbewijs|policy|member|customer|client|kunden|"
                    "patient|\\bmrn\\b|insurance|versicher|assurance|seguro|\\btax\\b|steuer|\\btin\\b|\\bvat\\b|"
                    "\\bssn\\b|social security|national id|\\bid (?:number|no|card)|\\b(?:user|customer|member|patient|employee|student|personal|tax) id\\b|identity|identit|ausweis|\\bdni\\b|\\bnie\\b|\\bcpf\\b|"
                    "aadhaar|\\bpan\\b|\\bbsn\\b|\\bpesel\\b|routing|sort code|\\bbsb\\b|employee|student|matricul|"
                    "personnummer|henkilötunnus|身份证|マイナンバー|주민등록|snils|снилс|инн",
    [CTX_SECRET] = "password|passwd|\\bpwd\\b|\\bpass\\b|secret|token|api[ _-]?key|apikey|access[ _-]?key|private[ _-]?key|"
                   "credential|\\bauth|bearer|passwort|kennwort|mot de passe|contraseña|clave|parola d'ordine|"
                   "wachtwoord|senha|пароль|ключ|パスワード|密码|密碼|비밀번호|salasana|hasło|lösenord|signing key",
    [CTX_CARD] = "card|karte|carte|tarjeta|carta|kaart|cartão|карт|カード|卡|카드|visa|mastercard|amex|\\bcc\\b|credit|debit",
    [CTX_IP] = "\\bip\\b|ip address|ip-adresse|adresse ip|dirección ip|indirizzo ip|ip-adres|endereço ip|ip-адрес|ipアドレス|ip地址|ip 주소|\\bfrom\\b|\\bhost",
    [CTX_USER] = "username|user name|\\blogin|\\buser\\s*:|benutzer|nom d'utilisateur|identifiant|usuario|utente|gebruikersnaam|"
                 "usuário|логин|ユーザー名|用户名|사용자|아이디|handle",
    [CTX_PESEL] = "pesel",
    [CTX_BSN] = "\\bbsn\\b|burgerservicenummer|sofinummer",
    [CTX_IMEI] = "\\bimei\\b",
};

/* ---- patterns ---- */

static int ck_email(const scan_ctx *c, size_t *b, size_t *e, float *score);
static int ck_phone(const scan_ctx *c, size_t *b, size_t *e, float *score);
static int ck_url(const scan_ctx *c, size_t *b, size_t *e, float *score);
static int ck_bare_ip(const scan_ctx *c, size_t *b, size_t *e, float *score);
static int ck_intranet_host(const scan_ctx *c, size_t *b, size_t *e, float *score);
static int ck_date(const scan_ctx *c, size_t *b, size_t *e, float *score);
static int ck_card(const scan_ctx *c, size_t *b, size_t *e, float *score);
static int ck_iban(const scan_ctx *c, size_t *b, size_t *e, float *score);
static int ck_ssn(const scan_ctx *c, size_t *b, size_t *e, float *score);
static int ck_nino(const scan_ctx *c, size_t *b, size_t *e, float *score);
static int ck_dni(const scan_ctx *c, size_t *b, size_t *e, float *score);
static int ck_cf(const scan_ctx *c, size_t *b, size_t *e, float *score);
static int ck_nir(const scan_ctx *c, size_t *b, size_t *e, float *score);
static int ck_pesel(const scan_ctx *c, size_t *b, size_t *e, float *score);
static int ck_cpf(const scan_ctx *c, size_t *b, size_t *e, float *score);
static int ck_cn_rid(const scan_ctx *c, size_t *b, size_t *e, float *score);
static int ck_bsn(const scan_ctx *c, size_t *b, size_t *e, float *score);
static int ck_se_pnr(const scan_ctx *c, size_t *b, size_t *e, float *score);
static int ck_account_ctx(const scan_ctx *c, size_t *b, size_t *e, float *score);
static int ck_jwt(const scan_ctx *c, size_t *b, size_t *e, float *score);
static int ck_key_value(const scan_ctx *c, size_t *b, size_t *e, float *score);
static int ck_not_placeholder(const scan_ctx *c, size_t *b, size_t *e, float *score);
static int ck_entropy(const scan_ctx *c, size_t *b, size_t *e, float *score);
static int ck_conn(const scan_ctx *c, size_t *b, size_t *e, float *score);
static int ck_person(const scan_ctx *c, size_t *b, size_t *e, float *score);
static int ck_trim_value(const scan_ctx *c, size_t *b, size_t *e, float *score);
static int ck_mac(const scan_ctx *c, size_t *b, size_t *e, float *score);
static int ck_user(const scan_ctx *c, size_t *b, size_t *e, float *score);
static int ck_imei(const scan_ctx *c, size_t *b, size_t *e, float *score);

/* characters that end a URL in CJK text (no spaces there) */
#define NOT_CJK "\\p{Han}\\p{Hiragana}\\p{Katakana}\\p{Hangul}、。，：；！？（）「」『』【】"
#define NAME_WORD "\\p{Lu}[\\p{Ll}'’]+(?:-\\p{Lu}[\\p{Ll}'’]+)?"
#define NAME_2 NAME_WORD "(?:[ \\t]+(?:(?:van|von|de|da|di|del|della|der|den|le|la|du|dos|das|ter|ten|bin|al)[ \\t]+)?" NAME_WORD "){0,2}"
#define MONTHS "(?:January|February|March|April|May|June|July|August|September|October|November|December|" \
    "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec|Januar|Februar|März|Juni|Juli|Oktober|Dezember|" \
    "janvier|février|mars|avril|mai|juin|juillet|août|septembre|octobre|novembre|décembre|" \
    "enero|febrero|marzo|abril|mayo|junio|julio|agosto|septiembre|octubre|noviembre|diciembre|" \
    "gennaio|febbraio|aprile|maggio|giugno|luglio|settembre|ottobre|dicembre|" \
    "januari|februari|maart|mei|augustus|oktober|" \
    "janeiro|fevereiro|março|maio|junho|julho|setembro|outubro|novembro|dezembro|" \
    "января|февраля|марта|апреля|мая|июня|июля|августа|сентября|октября|ноября|декабря|" \
    "stycznia|lutego|marca|kwietnia|maja|czerwca|lipca|sierpnia|września|października|listopada|grudnia)"

static const rule_def k_rules[] = {
    /* ---- e-mail ---- */
    {PII_EMAIL, 0, 0.95f, ck_email,
     "(?<![\\p{Latin}\\p{N}_.%+\\-])[\\p{Latin}\\p{N}_%+\\-](?:[\\p{Latin}\\p{N}_.%+\\-]{0,63})@(?:[\\p{Latin}\\p{N}][\\p{Latin}\\p{N}\\-]{0,62}\\.){1,8}\\p{Latin}{2,24}(?![\\p{Latin}\\p{N}_\\-@])", NULL},
    /* ---- phone ---- */
    {PII_PHONE, 0, 0.8f, ck_phone, "(?<![A-Za-z0-9_+/.,\\-])(?:\\+|00)?\\(?\\d[\\d \\t().\\-/]{5,22}\\d(?![A-Za-z0-9_\\-]|[.,]\\d)", NULL},
    /* ---- URLs and private hosts ---- */
    {PII_URL, 0, 0.8f, ck_url, "(?i)\\b(?:https?|ftp|sftp|smb|file)://[^\\s<>\"'`{}|\\\\^\\[\\]" NOT_CJK "]{1,2048}", "://"},
    {PII_URL, 0, 0.8f, ck_url, "(?i)(?<![A-Za-z0-9_./@-])www\\.[^\\s<>\"'`{}|\\\\^\\[\\]" NOT_CJK "]{3,2048}", "www.|WWW."},
    {PII_URL, 0, 0.75f, ck_intranet_host,
     "(?i)(?<![A-Za-z0-9_./@:-])(?:[a-z0-9][a-z0-9\\-]{0,62}\\.){1,6}(?:local|internal|intranet|corp|lan|localdomain|home\\.arpa|private)"
     "(?::\\d{1,5})?(?:/[^\\s<>\"'`]{0,1024})?(?![A-Za-z0-9_\\-])", NULL},
    {PII_URL, 0, 0.7f, ck_bare_ip, "(?<![A-Za-z0-9_.:/])(?:\\d{1,3}\\.){3}\\d{1,3}(?::\\d{1,5})?(?![A-Za-z0-9_]|\\.\\d)", NULL},
    /* ---- dates (only with a birth/death context) ---- */
    {PII_DATE, 0, 0.8f, ck_date, "(?<![A-Za-z0-9_.:/\\-])\\d{1,4}[./\\-]\\d{1,2}[./\\-]\\d{1,4}(?![A-Za-z0-9_]|[.:/\\-]\\d)", NULL},
    {PII_DATE, 0, 0.8f, ck_date, "(?i)(?<![A-Za-z0-9_])\\d{1,2}(?:st|nd|rd|th|er|º|\\.)?\\s?(?:de\\s)?" MONTHS "\\.?,?\\s(?:de\\s)?\\d{4}(?!\\w)", NULL},
    {PII_DATE, 0, 0.8f, ck_date, "(?i)(?<![A-Za-z0-9_])" MONTHS "\\.?\\s\\d{1,2}(?:st|nd|rd|th)?,?\\s\\d{4}(?!\\w)", NULL},
    {PII_DATE, 0, 0.8f, ck_date, "\\d{4}\\s?[年년]\\s?\\d{1,2}\\s?[月월]\\s?\\d{1,2}\\s?[日일]", "年|년"},
    /* ---- account numbers and national IDs ---- */
    {PII_ACCOUNT, 0, 0.95f, ck_card, "(?<![\\d\\-.])\\d(?:[ \\-]?\\d){12,18}(?![\\d\\-]|[.,]\\d)", NULL},
    {PII_ACCOUNT, 0, 0.95f, ck_iban, "(?<![A-Za-z0-9_])[A-Z]{2}\\d{2}(?:[ ]?[A-Z0-9]){11,31}(?![A-Za-z0-9_])", NULL},
    {PII_ACCOUNT, 0, 0.9f, ck_ssn, "(?<![A-Za-z0-9_\\-])\\d{3}[\\- ]\\d{2}[\\- ]\\d{4}(?![A-Za-z0-9_\\-])", NULL},
    {PII_ACCOUNT, 0, 0.85f, ck_nino, "(?<![A-Za-z0-9_])[A-Z]{2}[ ]?\\d{2}[ ]?\\d{2}[ ]?\\d{2}[ ]?[A-D](?![A-Za-z0-9_])", NULL},
    {PII_ACCOUNT, 0, 0.85f, ck_dni, "(?<![A-Za-z0-9_\\-])[XYZ]?\\d{7,8}-?[A-Z](?![A-Za-z0-9_])", NULL},
    {PII_ACCOUNT, 0, 0.9f, ck_cf, "(?i)(?<![A-Za-z0-9_])[A-Z]{6}\\d{2}[A-Z]\\d{2}[A-Z]\\d{3}[A-Z](?![A-Za-z0-9_])", NULL},
    {PII_ACCOUNT, 0, 0.9f, ck_nir, "(?<![A-Za-z0-9_])[12][ ]?\\d{2}[ ]?\\d{2}[ ]?(?:\\d{2}|2[AB])[ ]?\\d{3}[ ]?\\d{3}[ ]?\\d{2}(?![A-Za-z0-9_])", NULL},
    {PII_ACCOUNT, 0, 0.85f, ck_pesel, "(?<![A-Za-z0-9_])\\d{11}(?![A-Za-z0-9_])", NULL},
    {PII_ACCOUNT, 0, 0.9f, ck_cpf, "(?<![A-Za-z0-9_.\\-])\\d{3}\\.?\\d{3}\\.?\\d{3}-?\\d{2}(?![A-Za-z0-9_]|[.\\-]\\d)", NULL},
    {PII_ACCOUNT, 0, 0.9f, ck_cn_rid, "(?<![A-Za-z0-9_])\\d{17}[\\dX](?![A-Za-z0-9_])", NULL},
    {PII_ACCOUNT, 0, 0.8f, ck_bsn, "(?<![A-Za-z0-9_.])\\d{4}\\.?\\d{2}\\.?\\d{3}(?![A-Za-z0-9_]|\\.\\d)", NULL},
    {PII_ACCOUNT, 0, 0.9f, ck_se_pnr, "(?<![A-Za-z0-9_\\-])(?:19|20)?\\d{6}[\\-+]\\d{4}(?![A-Za-z0-9_\\-])", NULL},
    {PII_ACCOUNT, 0, 0.75f, ck_account_ctx, "(?<![A-Za-z0-9_\\-./])(?=[A-Z0-9\\-/ ]{0,24}\\d)[A-Z0-9](?:[A-Z0-9]|[\\- /](?=[A-Z0-9])){4,28}(?![A-Za-z0-9_\\-]|[./]\\w)", NULL},
    /* ---- secrets: known formats ---- */
    {PII_SECRET, 0, 0.99f, NULL,
     "-----BEGIN (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----[\\s\\S]{0,16384}?-----END (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----", "-----BEGIN "},
    {PII_SECRET, 0, 0.97f, ck_not_placeholder, "(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])", "AKIA|ASIA|ABIA|ACCA"},
    {PII_SECRET, 0, 0.97f, NULL, "(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})(?![A-Za-z0-9_])", "ghp_|gho_|ghu_|ghs_|ghr_|github_pat_"},
    {PII_SECRET, 0, 0.97f, NULL, "(?<![\\w-])glpat-[A-Za-z0-9_\\-]{20,64}(?![\\w-])", "glpat-"},
    {PII_SECRET, 0, 0.97f, NULL, "(?<![\\w-])xox[abposr]-[A-Za-z0-9\\-]{10,255}(?![\\w-])", "xox"},
    {PII_SECRET, 0, 0.97f, NULL, "https://hooks\\.slack\\.com/services/[A-Za-z0-9_/]{20,128}", "hooks.slack.com"},
    {PII_SECRET, 0, 0.95f, ck_not_placeholder, "(?<![\\w-])(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,247}(?![\\w-])", "sk_|rk_"},
    {PII_SECRET, 0, 0.95f, ck_not_placeholder, "(?<![\\w-])sk-(?:proj-|ant-(?:api03-)?|svcacct-|admin-)?[A-Za-z0-9_\\-]{20,200}(?![\\w-])", "sk-"},
    {PII_SECRET, 0, 0.97f, NULL, "(?<![\\w-])AIza[0-9A-Za-z_\\-]{35}(?![\\w-])", "AIza"},
    {PII_SECRET, 0, 0.95f, NULL, "(?<![\\w-])ya29\\.[0-9A-Za-z_\\-]{20,512}(?![\\w-])", "ya29."},
    {PII_SECRET, 0, 0.9f, NULL, "(?<![\\w])(?:SK|AC)[0-9a-f]{32}(?![\\w])", NULL},
    {PII_SECRET, 0, 0.97f, NULL, "(?<![\\w-])SG\\.[\\w\\-]{22}\\.[\\w\\-]{43}(?![\\w-])", "SG."},
    {PII_SECRET, 0, 0.97f, NULL, "(?<![\\w-])(?:npm_[A-Za-z0-9]{36}|hf_[A-Za-z0-9]{34}|pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\\-]{50,512}|"
                                 "dop_v1_[a-f0-9]{64}|shpat_[a-fA-F0-9]{32}|xapp-\\d-[A-Z0-9]+-\\d+-[a-z0-9]{32,})(?![\\w-])", "npm_|hf_|pypi-|dop_v1_|shpat_|xapp-"},
    {PII_SECRET, 0, 0.9f, ck_not_placeholder, "(?<![\\w:])\\d{8,10}:AA[A-Za-z0-9_\\-]{33}(?![\\w-])", ":AA"},
    {PII_SECRET, 0, 0.9f, ck_not_placeholder, "(?<![\\w.-])[MNO][A-Za-z\\d]{23,25}\\.[\\w\\-]{6}\\.[\\w\\-]{27,38}(?![\\w.-])", NULL},
    {PII_SECRET, 0, 0.95f, ck_jwt, "(?<![\\w-])eyJ[A-Za-z0-9_\\-]{8,4096}\\.eyJ[A-Za-z0-9_\\-]{8,8192}\\.[A-Za-z0-9_\\-]{0,2048}(?![\\w-])", "eyJ"},
    {PII_SECRET, 0, 0.95f, ck_conn,
     "(?i)(?<![\\w])(?:postgres(?:ql)?|mysql|mariadb|mongodb(?:\\+srv)?|redis|rediss|amqps?|mssql|sqlserver|"
     "jdbc:[a-z]+|oracle|couchdb|neo4j|ldaps?|ftp|sftp|smtps?|https?)://[^\\s:/@\"'<>]{1,128}:[^\\s@\"'<>]{1,256}@[^\\s\"'<>]{1,512}", "://"},
    {PII_SECRET, 1, 0.9f, ck_not_placeholder,
     "(?i)(?:AccountKey|SharedAccessKey|SharedAccessSignature|sig|Password|Pwd)=([A-Za-z0-9+/%_\\-]{8,256}={0,2})(?=[;&\\s\"']|$)", "="},
    {PII_SECRET, 1, 0.9f, ck_not_placeholder, "(?i)\\bbearer[ \\t]+([A-Za-z0-9._~+/\\-]{20,4096}=*)(?![\\w\\-])", "earer|EARER"},
    /* ---- secrets: key = value assignments and high-entropy tokens near a secret word ---- */
    {PII_SECRET, 1, 0.85f, ck_key_value,
     "(?i)(?:password|passwd|pwd|pass|secret|token|api[_ \\-]?key|apikey|access[_ \\-]?key|secret[_ \\-]?key|private[_ \\-]?key|"
     "client[_ \\-]?secret|auth[_ \\-]?token|credentials?|passwort|kennwort|mot de passe|contraseña|clave|password d'accesso|"
     "wachtwoord|senha|пароль|パスワード|密码|密碼|비밀번호|salasana|hasło|lösenord)[\\w\\-]{0,20}[\"']?[ \\t]{0,4}"
     "(?:[:=]|=>|:=|\\bis\\b|\\bist\\b|\\best\\b|\\bes\\b|è|：)[ \\t]{0,4}[\"'`]?([^\\s\"'`,;" NOT_CJK "]{4,512})", NULL},
    {PII_SECRET, 0, 0.7f, ck_entropy, "(?<![\\w+/=\\-.])[A-Za-z0-9+/_\\-]{20,512}={0,2}(?![\\w+/=\\-]|\\.\\w)", NULL},
    /* ---- addresses ---- */
    {PII_ADDRESS, 0, 0.8f, NULL,
     "(?<![\\w])\\d{1,5}[A-Za-z]?\\s(?:(?:[NSEW]|North|South|East|West)\\.?\\s)?(?:\\p{Lu}[\\p{L}'.\\-]*\\s){1,4}"
     "(?:Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Court|Ct|Place|Pl|Way|Terrace|Parkway|Pkwy|Highway|Hwy|Circle|Square|Sq|Close|Crescent|Gardens|Row|Mews)\\b\\.?"
     "(?:,?\\s(?:Apt|Apartment|Suite|Ste|Unit|Flat|#)\\.?\\s?[\\w\\-]{1,6})?"
     "(?:,\\s\\p{Lu}[\\p{L}.'\\-]*(?:\\s\\p{Lu}[\\p{L}.'\\-]*){0,3}(?:,\\s[A-Z]{2})?\\s\\d{5}(?:-\\d{4})?"
     "|,\\s\\p{Lu}[\\p{L}.'\\-]*(?:\\s\\p{Lu}[\\p{L}.'\\-]*){0,2},?\\s[A-Z]{1,2}\\d[A-Z\\d]?\\s\\d[A-Z]{2}"
     "|,\\s\\p{Lu}[\\p{L}.'\\-]*(?:\\s\\p{Lu}[\\p{L}.'\\-]*){0,3},\\s[A-Z]{2}(?![\\w]))?", NULL},
    {PII_ADDRESS, 0, 0.8f, NULL,
     "(?<![\\w])\\p{Lu}[\\p{L}\\-]{1,40}(?:straße|strasse|str\\.|weg|allee|platz|gasse|ring|damm|ufer|straat|laan|gracht|plein|"
     "steeg|dijk|gatan|vägen|gränd|gade|vej|veien|gata|katu|tie)(?:\\s|(?<=\\.))\\d{1,4}\\s?[a-z]?\\b"
     "(?:,\\s(?:(?:[A-Z]-)?\\d{4,5}(?:\\s?[A-Z]{2})?|\\d{3}\\s\\d{2})\\s\\p{Lu}[\\p{L}\\-]+(?:\\s(?:am|an der|im|bei)\\s\\p{Lu}[\\p{L}\\-]+)?)?", NULL},
    {PII_ADDRESS, 0, 0.8f, NULL,
     "(?<![\\w])\\p{Lu}[\\p{L}\\-]{1,30}\\s(?:Straße|Strasse|Str\\.|Weg|Allee|Platz|Gasse)\\s\\d{1,4}\\s?[a-z]?\\b"
     "(?:,\\s\\d{4,5}\\s\\p{Lu}[\\p{L}\\-]+)?", NULL},
    {PII_ADDRESS, 0, 0.8f, NULL,
     "(?i)(?<![\\w])\\d{1,4}(?:\\s?(?:bis|ter))?,?\\s(?:rue|avenue|boulevard|bd|allée|chemin|impasse|place|quai|route|cours)\\s"
     "(?-i:[^\\n,;.!?]{2,40})(?:,\\s\\d{5}\\s\\p{Lu}[\\p{L}\\-]+(?:-\\p{Lu}[\\p{L}\\-]+){0,2})?", NULL},
    {PII_ADDRESS, 0, 0.8f, NULL,
     "(?<![\\w])(?:Calle|C/|ul\\.|al\\.|Avenida|Avda\\.|Paseo|Plaza|Camino|Carrer|Via|Viale|Piazza|Corso|Largo|Vicolo|Rua|Travessa|Praça|Alameda)\\s"
     "(?:(?:de|del|de la|della|dei|delle|di|do|da|dos|das)\\s)?\\p{Lu}[\\p{L}'’.\\- ]{1,40}?,?\\s(?:n\\.?º?\\s?)?\\d{1,4}[a-zA-Z]?(?![\\w])"
     "(?:,\\s(?:\\d{1,2}º?\\s?[A-Za-z]{0,3},?\\s)?(?:\\d{5}|\\d{4}-\\d{3}|\\d{2}-\\d{3})\\s\\p{Lu}[\\p{L}\\-]+)?", NULL},
    {PII_ADDRESS, 0, 0.8f, NULL,
     "(?:ул\\.|улица|пр\\.|проспект|пер\\.|переулок|наб\\.|набережная|бульвар|шоссе)\\s?\\p{Lu}[\\p{L}.\\- ]{1,30}?,?\\s?(?:д\\.\\s?)?\\d{1,4}"
     "(?:,?\\s?(?:кв\\.|корп\\.|стр\\.)\\s?\\d{1,4}){0,3}", "ул|пр|пер|наб|бульвар|шоссе"},
    {PII_ADDRESS, 0, 0.8f, NULL,
     "(?:〒\\s?)?(?:\\d{3}-\\d{4}\\s?)?(?:東京都|北海道|京都府|大阪府|\\p{Han}{2,3}県)\\p{Han}{1,5}?[市区町村郡]"
     "[\\p{Han}\\p{Katakana}ー]{0,10}?\\d{1,4}(?:丁目|-)\\d{1,4}(?:(?:番地?|-)\\d{1,4}号?)?", "都|道|府|県"},
    {PII_ADDRESS, 0, 0.8f, NULL,
     "(?:(?:北京|上海|天津|重庆)市|(?:广东|江苏|浙江|山东|河南|四川|湖北|湖南|河北|福建|安徽|辽宁|陕西|江西|云南|山西|贵州|黑龙江|吉林|甘肃|海南|青海|台湾)省)\\p{Han}{1,6}?[市区县]\\p{Han}{1,12}?(?:路|街|道|大道|巷)\\d{1,5}号(?:\\p{Han}{0,8}?\\d{1,5}(?:室|楼))?", "省|市"},
    {PII_ADDRESS, 0, 0.8f, NULL,
     "(?:서울|부산|대구|인천|광주|대전|울산|세종|경기|강원|충북|충남|전북|전남|경북|경남|제주)\\p{Hangul}{0,5}\\s\\p{Hangul}{1,6}[시군구]"
     "(?:\\s\\p{Hangul}{1,6}[시군구])?\\s\\p{Hangul}{1,10}(?:로|길|동)\\s?\\d{1,4}(?:-\\d{1,4})?", "시|군|구"},
    {PII_ADDRESS, 1, 0.75f, ck_trim_value,
     "(?i)(?<![\\w])(?:address|home address|mailing address|adresse|anschrift|wohnort|dirección|domicilio|indirizzo|adres|"
     "endereço|morada|адрес|住所|地址|주소|osoite|adress)\\s?[:：]\\s?([^\\n]{6,120})", NULL},
    /* ---- persons ---- */
    {PII_PERSON, 1, 0.85f, ck_person,
     "(?<![\\w])(?:Mr|Mrs|Ms|Mx|Miss|Dr|Prof|Herr|Frau|Mme|Mlle|M\\.|Sr|Sra|Srta|Sig|Sig\\.ra|Dott|Dhr|Mevr|Pan|Pani|Г-н|Г-жа)\\.?\\s"
     "(" NAME_2 ")", NULL},
    {PII_PERSON, 1, 0.9f, ck_person,
     "(?i:my name is|my name's|je m'appelle|je m’appelle|mon nom est|ich heiße|ich heisse|mein name ist|me llamo|mi nombre es|"
     "mi chiamo|il mio nome è|mijn naam is|ik heet|meu nome é|eu me chamo|chamo-me|меня зовут|nazywam się|jag heter|"
     "mitt namn är|minun nimeni on|benim adım|signed,|signed by)\\s(" NAME_2 ")", NULL},
    {PII_PERSON, 1, 0.85f, ck_person,
     "(?i:\\bname|full name|\\bnom|nombre|\\bnome|\\bnaam|\\bимя|\\bфио|patient|employee|contact person|cardholder|"
     "account holder|titular|inhaber|titulaire|intestatario)\\s?[:：]\\s?(" NAME_2 ")", NULL},
    {PII_PERSON, 1, 0.8f, ck_person,
     "(?:Dear|Hi|Hello|Hey|Hallo|Liebe|Lieber|Sehr geehrte|Sehr geehrter|Bonjour|Cher|Chère|Hola|Querido|Querida|Estimado|Estimada|"
     "Ciao|Caro|Cara|Gentile|Beste|Olá|Prezado|Prezada|Hej|Hei|Здравствуйте,?|Уважаемый|Уважаемая|Дорогой|Дорогая|Witaj|Drogi|Droga)"
     "\\s(?:(?:Mr|Mrs|Ms|Dr|Herr|Frau|M\\.|Mme|Sr\\.|Sra\\.|Prof)\\.?\\s)?(" NAME_2 ")(?=[,!:\\n])", NULL},
    {PII_PERSON, 1, 0.8f, ck_person,
     "(?:Regards|Best regards|Kind regards|Warm regards|Best|Thanks|Thank you|Cheers|Sincerely|Yours|Mit freundlichen Grüßen|"
     "Viele Grüße|Beste Grüße|Liebe Grüße|Cordialement|Bien à vous|Bien cordialement|Saludos|Atentamente|Un saludo|Cordiali saluti|"
     "Distinti saluti|Saluti|Met vriendelijke groet|Groeten|Atenciosamente|Abraços|С уважением|Pozdrawiam|Med vänliga hälsningar|"
     "Hälsningar|Ystävällisin terveisin),?[ \\t]*\\r?\\n[ \\t]*(" NAME_2 ")(?=\\s|$)", NULL},
    {PII_PERSON, 1, 0.85f, NULL, "(?:担当者?|氏名|名前|お名前|姓名|联系人|負責人|负责人|담당자|성명|이름)\\s?[:：]\\s?(\\p{Han}{1,3}[ 　]?\\p{Han}{1,3}|\\p{Hangul}{2,4})(?![\\p{Han}\\p{Hangul}])",
     "担当|氏名|名前|姓名|联系人|責人|责人|담당자|성명|이름"},
    {PII_PERSON, 1, 0.9f, NULL, "(?:私の名前は|私は|わたしは)(\\p{Han}{2,4}(?:\\s?\\p{Han}{1,3})?)(?:です|と申します|といいます)", "私|わたし"},
    {PII_PERSON, 1, 0.75f, NULL, "(?<![\\p{Han}])(\\p{Han}{3,4})(?:さん|様|氏|先生)", "さん|様|氏|先生"},
    {PII_PERSON, 1, 0.9f, NULL, "(?:我叫|我的名字是|我是)(\\p{Han}{2,3})(?![\\p{Han}]{2})", "我"},
    {PII_PERSON, 1, 0.9f, NULL, "(?:제 이름은|저는)\\s?(\\p{Hangul}{2,4})(?:입니다|이에요|예요|라고)", "제 이름|저는"},
    {PII_PERSON, 1, 0.75f, ck_person,
     "(?<![\\w])((?:James|John|Robert|Michael|William|David|Richard|Joseph|Thomas|Charles|Daniel|Matthew|Mark|Paul|Steven|Andrew|"
     "Kevin|Brian|George|Edward|Jason|Ryan|Jacob|Mary|Patricia|Jennifer|Linda|Elizabeth|Barbara|Susan|Jessica|Sarah|Karen|Nancy|"
     "Lisa|Margaret|Emily|Emma|Olivia|Sophia|Anna|Laura|Julia|Hannah|Lukas|Jonas|Felix|Maximilian|Leon|Paul|Lena|Mia|Sophie|"
     "Klaus|Jürgen|Wolfgang|Stefan|Andreas|Sabine|Ursula|Monika|Pierre|Jean|Louis|Camille|Élodie|Chloé|Manon|Mathieu|Nicolas|"
     "François|Isabelle|Nathalie|Juan|José|Carlos|Javier|Miguel|Alejandro|Lucía|Carmen|María|Sofía|Valentina|Marco|Giuseppe|"
     "Giovanni|Francesco|Alessandro|Luca|Matteo|Giulia|Chiara|Francesca|Federica|Pieter|Jan|Sanne|Daan|Bram|Femke|João|Pedro|"
     "Tiago|Ana|Beatriz|Mariana|Gabriel|Rafael|Larissa|Fernanda|Piotr|Krzysztof|Tomasz|Agnieszka|Katarzyna|Magdalena|Erik|Lars|"
     "Anders|Johan|Ingrid|Astrid|Karin|Mehmet|Mustafa|Ayşe|Fatma|Emre|Elif|Ahmed|Mohammed|Fatima|Priya|Rahul|Arjun|Ananya)"
     "\\s\\p{Lu}[\\p{Ll}'’]+(?:-\\p{Lu}[\\p{Ll}'’]+)?)(?![\\w])", NULL},
    {PII_PERSON, 1, 0.85f, NULL,
     "((?:Иван|Сергей|Алексей|Дмитрий|Андрей|Михаил|Николай|Владимир|Ольга|Елена|Татьяна|Наталья|Анна|Мария|Екатерина|Светлана)"
     "\\s\\p{Lu}\\p{Ll}+(?:\\s\\p{Lu}\\p{Ll}+)?)", "\xd0"},
    /* ---- other PII ---- */
    {PII_OTHER, 0, 0.6f, ck_mac, "(?i)(?<![\\w:\\-])[0-9a-f]{2}(?:[:\\-][0-9a-f]{2}){5}(?![\\w:\\-])", NULL},
    {PII_OTHER, 1, 0.7f, ck_user,
     "(?i)(?:username|user name|user|login|benutzername|benutzer|nom d'utilisateur|identifiant|usuario|utente|gebruikersnaam|"
     "usuário|логин|ユーザー名|用户名|사용자명|아이디|handle|användarnamn|brukernavn|käyttäjätunnus|nazwa użytkownika)\\s?[:=：]\\s?@?([\\p{Latin}\\p{Cyrillic}\\p{N}._\\-]{3,40})", NULL},
    {PII_OTHER, 0, 0.8f, ck_imei, "(?<![\\w])\\d{15}(?![\\w])", "IMEI|imei|Imei"},
};

#define N_RULES LL_ARRAY_LEN(k_rules)

static pcre2_code *g_code[N_RULES];
static pcre2_code *g_ctx[CTX_N];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static ll_status g_init_status;
static char g_init_msg[256];

static pcre2_code *compile(const char *pat, const char *what) {
    int err;
    PCRE2_SIZE off;
    pcre2_code *c = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err,
                                  &off, NULL);
    if (!c) {
        PCRE2_UCHAR msg[128];
        pcre2_get_error_message(err, msg, sizeof(msg));
        snprintf(g_init_msg, sizeof(g_init_msg), "privacy: pattern %s does not compile at offset %zu: %s", what,
                 (size_t)off, (const char *)msg);
        return NULL;
    }
    pcre2_jit_compile(c, PCRE2_JIT_COMPLETE); /* falls back to the interpreter if JIT is unavailable */
    return c;
}

static void init_patterns(void) {
    char what[32];
    for (size_t i = 0; i < N_RULES; i++) {
        snprintf(what, sizeof(what), "rule %zu", i);
        if (!(g_code[i] = compile(k_rules[i].pat, what))) { g_init_status = LL_ERR_INTERNAL; return; }
    }
    for (int i = 0; i < CTX_N; i++) {
        char buf[2048];
        snprintf(buf, sizeof(buf), "(?i)(?:%s)", k_ctx_pat[i]);
        snprintf(what, sizeof(what), "context %d", i);
        if (!(g_ctx[i] = compile(buf, what))) { g_init_status = LL_ERR_INTERNAL; return; }
    }
}

/* ---- helpers ---- */

static size_t back_to_char(const char *s, size_t p) {
    while (p > 0 && ((unsigned char)s[p] & 0xC0) == 0x80) p--;
    return p;
}

/* 1 if context list `which` matches within `before` bytes before b or `after` bytes after e. */
static int has_ctx(const scan_ctx *c, int which, size_t b, size_t e, size_t before, size_t after) {
    size_t lo = b > before ? back_to_char(c->s, b - before) : 0;
    size_t hi = e + after < c->n ? back_to_char(c->s, e + after) : c->n;
    if (lo < b) {
        int rc = pcre2_match(g_ctx[which], (PCRE2_SPTR)(c->s + lo), b - lo, 0, PCRE2_NO_UTF_CHECK, c->md, c->mc);
        if (rc > 0) return 1;
    }
    if (hi > e) {
        int rc = pcre2_match(g_ctx[which], (PCRE2_SPTR)(c->s + e), hi - e, 0, PCRE2_NO_UTF_CHECK, c->md, c->mc);
        if (rc > 0) return 1;
    }
    return 0;
}

static int count_digits(const char *s, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k += isdigit((unsigned char)s[i]) != 0;
    return k;
}

static int ci_has(const char *s, size_t n, const char *needle) {
    size_t m = strlen(needle);
    for (size_t i = 0; i + m <= n; i++)
        if (!strncasecmp(s + i, needle, m)) return 1;
    return 0;
}

/* Obvious placeholders and examples: never a real value. */
static int is_placeholder(const char *s, size_t n) {
    static const char *const bad[] = {
        "example", "placeholder", "your_", "your-", "yourkey", "your key", "<", ">", "${", "{{", "xxxx", "XXXX", "****",
        "....", "changeme", "change_me", "redacted", "REDACTED", "dummy", "sample", "todo", "fixme", "os.environ",
        "process.env", "getenv", "env(", "secret_here", "_here", "insert", "replace", "foobar", "12345678", "abcdef12",
        "00000000", "11111111", "aaaaaaaa", "test_key", "testkey", "mykey", "my_key", "my-key", "my_password", "mypassword",
        "password123", "hunter2", "none", "null", "undefined", "true", "false", "******", "••••", "…", "[", "]", "(", ")",
    };
    for (size_t i = 0; i < LL_ARRAY_LEN(bad); i++)
        if (ci_has(s, n, bad[i])) return 1;
    /* one character repeated (xxxxxxxx, 00000) */
    int same = 1;
    for (size_t i = 1; i < n; i++) same &= s[i] == s[0];
    return same;
}

static int is_hex(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i]) && s[i] != '-') return 0;
    return 1;
}

/* ---- checks ---- */

static int ck_email(const scan_ctx *c, size_t *b, size_t *e, float *score) {
    const char *s = c->s + *b;
    size_t n = *e - *b;
    const char *at = memchr(s, '@', n);
    size_t local = (size_t)(at - s);
    if (local == 0 || s[local - 1] == '.' || s[0] == '.') return 0;
    const char *dom = at + 1, *end = s + n;
    size_t dn = (size_t)(end - dom);
    const char *tld = end;
    while (tld > dom && tld[-1] != '.') tld--;
    size_t tn = (size_t)(end - tld);
    /* file names and assets (logo@2x.png) and package specs are not addresses */
    static const char *const ext[] = {"png", "jpg", "jpeg", "gif", "svg", "webp", "js", "ts", "css", "json", "py", "md",
                                      "txt", "html", "htm", "xml", "yaml", "yml", "lock", "tgz", "zip", "gz", "pdf", "ico"};
    for (size_t i = 0; i < LL_ARRAY_LEN(ext); i++)
        if (tn == strlen(ext[i]) && !strncasecmp(tld, ext[i], tn)) return 0;
    static const char *const ex_dom[] = {"example.com", "example.org", "example.net", "example", "test", "invalid",
                                         "localhost", "domain.com", "email.com", "company.com", "yourcompany.com",
                                         "yourdomain.com", "acme.com"};
    for (size_t i = 0; i < LL_ARRAY_LEN(ex_dom); i++) {
        size_t m = strlen(ex_dom[i]);
        if (dn >= m && !strncasecmp(end - m, ex_dom[i], m) && (dn == m || end[-(long)m - 1] == '.')) return 0;
    }
    static const char *const ex_local[] = {"user", "username", "name", "you", "your.name", "yourname", "your_email",
                                           "someone", "somebody", "email", "john.doe", "jane.doe", "firstname.lastname",
                                           "first.last", "foo", "bar", "test", "git"};
    for (size_t i = 0; i < LL_ARRAY_LEN(ex_local); i++)
        if (local == strlen(ex_local[i]) && !strncasecmp(s, ex_local[i], local)) return 0;
    /* role and mailing-list addresses reach an organisation, not a person */
    static const char *const role[] = {"info", "support", "contact", "admin", "noreply", "no-reply", "donotreply", "sales",
                                       "help", "webmaster", "postmaster", "hostmaster", "abuse", "security", "privacy",
                                       "hello", "office", "press", "jobs", "careers", "billing", "bugs", "team", "list",
                                       "notifications", "mailer-daemon", "root"};
    for (size_t i = 0; i < LL_ARRAY_LEN(role); i++)
        if (local == strlen(role[i]) && !strncasecmp(s, role[i], local)) return 0;
    static const char *const role_suffix[] = {"-bugs", "-devel", "-announce", "-users", "-discuss", "-request", "-owner",
                                              "-maintainers", "-team", "-help", "-support"};
    for (size_t i = 0; i < LL_ARRAY_LEN(role_suffix); i++) {
        size_t m = strlen(role_suffix[i]);
        if (local > m && !strncasecmp(s + local - m, role_suffix[i], m)) return 0;
    }
    if (!strncasecmp(s, "incoming+", 9)) return 0;
    static const char *const list_dom[] = {"lists.", "freelists.org", "googlegroups.com", "packages.debian.org",
                                           "bugs.debian.org", "users.noreply.github.com", "noreply."};
    for (size_t i = 0; i < LL_ARRAY_LEN(list_dom); i++)
        if (ci_has(dom, dn, list_dom[i])) return 0;
    for (const char *p = dom; p < end; p++)
        if (*p == '-' && (p[1] == '.' || p == end - 1)) return 0;
    *score = 0.95f;
    return 1;
}

/* Splits a phone candidate into digit groups; returns the count, fills lens (up to 16). */
static int digit_groups(const char *s, size_t n, int *lens, int cap) {
    int g = 0, cur = 0;
    for (size_t i = 0; i < n; i++) {
        if (isdigit((unsigned char)s[i])) cur++;
        else if (cur) {
            if (g < cap) lens[g] = cur;
            g++;
            cur = 0;
        }
    }
    if (cur) {
        if (g < cap) lens[g] = cur;
        g++;
    }
    return g;
}

static int ck_phone(const scan_ctx *c, size_t *b, size_t *e, float *score) {
    const char *s = c->s + *b;
    size_t n = *e - *b;
    int plus = s[0] == '+' || (n > 2 && s[0] == '0' && s[1] == '0' && s[2] != '0');
    int nd = count_digits(s, n);
    if (nd < 7 || nd > 15) return 0;
    int open = 0, dots = 0, seps = 0, slash = 0, space = 0, dash = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '(') open++;
        else if (s[i] == ')') { if (--open < 0) return 0; }
        else if (s[i] == '.') dots++;
        else if (s[i] == '/') slash++;
        else if (s[i] == ' ' || s[i] == '\t') space++;
        else if (s[i] == '-') dash++;
        if (!isdigit((unsigned char)s[i]) && s[i] != '+') seps++;
        if (i + 1 < n && !isdigit((unsigned char)s[i]) && !isdigit((unsigned char)s[i + 1]) && s[i] != ')' && s[i + 1] != '(' &&
            !(s[i] == ' ' && s[i + 1] == '(') && !(s[i] == ')' && s[i + 1] == ' '))
            return 0; /* two separators in a row: a list of numbers, not one phone number */
    }
    if (open) return 0;
    int lens[16];
    int g = digit_groups(s, n, lens, 16);
    /* dates, versions and IPs */
    if (!plus && g == 3 && ((lens[0] == 4 && lens[1] <= 2 && lens[2] <= 2) || (lens[0] <= 2 && lens[1] <= 2 && (lens[2] == 4 || lens[2] == 2))))
        return 0;
    if (!plus && dots && !space && !dash && !(s[0] == '0' && g >= 4)) return 0;
    /* a price or amount just before / a unit or percent just after */
    if (*b > 0) {
        size_t p = *b;
        while (p > 0 && c->s[p - 1] == ' ') p--;
        if (p > 0 && (c->s[p - 1] == '$' || c->s[p - 1] == '#')) return 0;
        if (p >= 2 && (unsigned char)c->s[p - 1] >= 0x80) { /* multi-byte currency signs */
            if (p >= 3 && (!memcmp(c->s + p - 3, "€", 3) || !memcmp(c->s + p - 3, "₹", 3) || !memcmp(c->s + p - 3, "₽", 3))) return 0;
            if (!memcmp(c->s + p - 2, "£", 2) || !memcmp(c->s + p - 2, "¥", 2)) return 0;
        }
    }
    if (*e < c->n && (c->s[*e] == '%' || (*e + 1 < c->n && c->s[*e] == ' ' && c->s[*e + 1] == '%'))) return 0;
    /* the tail of an alphanumeric code ("1Z 999 AA1 0123 4567 84", a parcel number): the token
     * just before the match mixes letters and digits */
    {
        size_t p = *b;
        if (p > 0 && c->s[p - 1] == ' ') p--;
        int alpha = 0, digit = 0;
        while (p > 0 && isalnum((unsigned char)c->s[p - 1])) {
            p--;
            alpha |= isalpha((unsigned char)c->s[p]) != 0;
            digit |= isdigit((unsigned char)c->s[p]) != 0;
        }
        if (alpha && digit && p < *b) return 0;
    }
    int ctx = has_ctx(c, CTX_PHONE, *b, *e, 40, 0);
    /* NANP 555-0100 .. 555-0199 are reserved for fiction and examples ("call 555-0100"), and are
     * skipped; but a full number with a real area code that the text calls a phone number ("text
     * me at (603) 555-0148") is someone's number as far as the gate can tell */
    {
        char dg[16];
        int k = 0;
        for (size_t i = 0; i < n && k < 15; i++)
            if (isdigit((unsigned char)s[i])) dg[k++] = s[i];
        int full = k >= 10 && memcmp(dg + k - 10, "555", 3) != 0;
        if (k >= 7 && !memcmp(dg + k - 7, "55501", 5) && !(ctx && full)) return 0;
    }
    int nanp = g == 3 && lens[0] == 3 && lens[1] == 3 && lens[2] == 4 && (dash || space || s[0] == '(') && !slash;
    int national = s[0] == '0' && s[1] != '0' && nd >= 9 && nd <= 12 && g >= 2 && (space || dash || slash || dots) && !(g == 2 && lens[0] >= 5);
    int grouped_ok = 1;
    for (int i = 0; i < g && i < 16; i++) grouped_ok &= lens[i] <= 5 || i == g - 1 || g == 1;
    if (plus && nd >= 8 && grouped_ok) *score = 0.9f;
    else if (ctx) *score = 0.85f;
    else if (nanp) *score = 0.75f;
    else if (national && grouped_ok) *score = 0.7f;
    else return 0;
    return 1;
}

/* URL parts, for the privacy tests. */
static int host_is_intranet(const char *h, size_t hn) {
    if (!hn) return 0;
    if (pii_private_ipv4(h, hn)) return 1;
    if (hn == 9 && !strncasecmp(h, "localhost", 9)) return 0;
    if (!memchr(h, '.', hn)) {
        /* a single-label host (http://wiki/, http://jira:8080) is an intranet name, unless it is a
         * bare IPv6 or numeric */
        return isalpha((unsigned char)h[0]) && hn >= 2;
    }
    static const char *const tld[] = {".local", ".internal", ".intranet", ".corp", ".lan", ".localdomain", ".home.arpa",
                                      ".private", ".home"};
    for (size_t i = 0; i < LL_ARRAY_LEN(tld); i++) {
        size_t m = strlen(tld[i]);
        if (hn > m && !strncasecmp(h + hn - m, tld[i], m)) return 1;
    }
    /* (tool names such as gitlab. or jira. are not enough: gitlab.gnome.org is public) */
    static const char *const lab[] = {"intranet.", "internal.", ".corp.", ".internal.", ".intra."};
    for (size_t i = 0; i < LL_ARRAY_LEN(lab); i++)
        if (ci_has(h, hn, lab[i]) && (lab[i][0] == '.' || !strncasecmp(h, lab[i], strlen(lab[i])))) {
            /* public SaaS (gitlab.com) is not private */
            if (hn >= 10 && !strncasecmp(h, "gitlab.com", 10)) return 0;
            return 1;
        }
    return 0;
}

static int url_is_personal(const char *h, size_t hn, const char *path, size_t pn) {
    struct { const char *host, *prefix; } personal[] = {
        {"docs.google.com", "/document/d/"}, {"docs.google.com", "/spreadsheets/d/"}, {"docs.google.com", "/presentation/d/"},
        {"docs.google.com", "/forms/d/"}, {"drive.google.com", "/"}, {"dropbox.com", "/s/"}, {"dropbox.com", "/scl/"},
        {"dropbox.com", "/sh/"}, {"1drv.ms", "/"}, {"onedrive.live.com", "/"}, {"sharepoint.com", "/"},
        {"wetransfer.com", "/downloads/"}, {"we.tl", "/"}, {"zoom.us", "/j/"}, {"zoom.us", "/my/"}, {"meet.google.com", "/"},
        {"teams.microsoft.com", "/l/"}, {"calendly.com", "/"}, {"linkedin.com", "/in/"}, {"facebook.com", "/"},
        {"instagram.com", "/"}, {"twitter.com", "/"}, {"x.com", "/"}, {"t.me", "/"}, {"wa.me", "/"}, {"tiktok.com", "/@"},
        {"paypal.me", "/"}, {"venmo.com", "/"}, {"cash.app", "/$"}, {"medium.com", "/@"}, {"vk.com", "/"},
        {"xing.com", "/profile/"}, {"signal.me", "/"}, {"doodle.com", "/poll/"}, {"icloud.com", "/"},
    };
    for (size_t i = 0; i < LL_ARRAY_LEN(personal); i++) {
        size_t m = strlen(personal[i].host), pm = strlen(personal[i].prefix);
        int host_ok = (hn == m && !strncasecmp(h, personal[i].host, m)) ||
                      (hn > m && h[hn - m - 1] == '.' && !strncasecmp(h + hn - m, personal[i].host, m));
        if (!host_ok || pn < pm || strncasecmp(path, personal[i].prefix, pm)) continue;
        /* bare site roots and help pages are public */
        if (pn <= pm + 1) continue;
        static const char *const pub[] = {"/help", "/about", "/policies", "/privacy", "/terms", "/legal", "/login",
                                          "/signup", "/home", "/explore", "/settings", "/search", "/pricing", "/download"};
        int is_pub = 0;
        for (size_t j = 0; j < LL_ARRAY_LEN(pub); j++)
            if (!strncasecmp(path, pub[j], strlen(pub[j]))) is_pub = 1;
        if (!is_pub) return 1;
    }
    /* query parameters that carry identity or credentials */
    const char *q = memchr(path, '?', pn);
    if (q) {
        static const char *const keys[] = {"email=", "e-mail=", "mail=", "user=", "userid=", "user_id=", "uid=", "username=",
                                           "token=", "access_token=", "auth=", "apikey=", "api_key=", "key=", "sig=",
                                           "signature=", "session=", "sessionid=", "sid=", "password=", "pwd=", "phone=",
                                           "name=", "invite=", "ssn=", "dob="};
        size_t qn = pn - (size_t)(q - path);
        for (size_t i = 0; i < LL_ARRAY_LEN(keys); i++) {
            size_t m = strlen(keys[i]);
            for (size_t j = 0; j + m <= qn; j++)
                if ((q[j] == '?' || q[j] == '&') && j + 1 + m <= qn && !strncasecmp(q + j + 1, keys[i], m)) return 1;
        }
    }
    return 0;
}

static void trim_url_tail(const char *s, size_t b, size_t *e) {
    /* sentence punctuation and unbalanced closing brackets are not part of the URL */
    for (;;) {
        char ch = s[*e - 1];
        if (*e > b + 1 && strchr(".,;:!?'\"", ch)) { (*e)--; continue; }
        if (*e > b + 1 && ch == ')') {
            int bal = 0;
            for (size_t i = b; i < *e; i++) bal += s[i] == '(' ? 1 : s[i] == ')' ? -1 : 0;
            if (bal < 0) { (*e)--; continue; }
        }
        break;
    }
}

static int ck_url(const scan_ctx *c, size_t *b, size_t *e, float *score) {
    trim_url_tail(c->s, *b, e);
    const char *s = c->s + *b;
    size_t n = *e - *b;
    const char *p = s;
    const char *sch = NULL;
    for (size_t i = 0; i + 2 < n; i++)
        if (s[i] == ':' && s[i + 1] == '/' && s[i + 2] == '/') { sch = s + i + 3; break; }
    p = sch ? sch : s;
    const char *end = s + n;
    const char *hs = p;
    const char *he = hs;
    while (he < end && *he != '/' && *he != '?' && *he != '#') he++;
    /* user info: user@host (user:pass@ is a credential, found by the secret rule) */
    const char *at = memchr(hs, '@', (size_t)(he - hs));
    if (at) hs = at + 1;
    const char *port = memchr(hs, ':', (size_t)(he - hs));
    const char *hend = port ? port : he;
    if (hend <= hs) return 0;
    if (at || host_is_intranet(hs, (size_t)(hend - hs)) || url_is_personal(hs, (size_t)(hend - hs), he, (size_t)(end - he))) {
        *score = 0.8f;
        return 1;
    }
    if (sch && !strncasecmp(s, "file://", 7)) {
        /* file paths under a home directory name their owner */
        if (ci_has(s, n, "/home/") || ci_has(s, n, "/Users/") || ci_has(s, n, "C:/Users/")) return 1;
    }
    return 0;
}

static int ck_intranet_host(const scan_ctx *c, size_t *b, size_t *e, float *score) {
    trim_url_tail(c->s, *b, e);
    const char *s = c->s + *b;
    size_t n = *e - *b;
    size_t hn = 0;
    while (hn < n && s[hn] != ':' && s[hn] != '/') hn++;
    if (!host_is_intranet(s, hn)) return 0;
    /* a bare "foo.local" inside prose is often a file or mDNS name; require a path, a port or 2+ labels */
    int labels = 0;
    for (size_t i = 0; i < hn; i++) labels += s[i] == '.';
    return hn < n || labels >= 2;
}

static int ck_bare_ip(const scan_ctx *c, size_t *b, size_t *e, float *score) {
    const char *s = c->s + *b;
    size_t n = *e - *b;
    const char *colon = memchr(s, ':', n);
    size_t ipn = colon ? (size_t)(colon - s) : n;
    if (pii_private_ipv4(s, ipn)) return 1;
    /* a public address is personal (other_pii) only when the text says it is an IP */
    int oct[4];
    if (sscanf(s, "%d.%d.%d.%d", &oct[0], &oct[1], &oct[2], &oct[3]) != 4) return 0;
    for (int i = 0; i < 4; i++)
        if (oct[i] > 255) return 0;
    if (oct[0] == 0 || oct[0] == 127 || oct[0] >= 224 || (oct[0] == 8 && oct[1] == 8) || (oct[0] == 1 && oct[1] == 1)) return 0;
    /* documentation ranges */
    if ((oct[0] == 192 && oct[1] == 0 && oct[2] == 2) || (oct[0] == 198 && oct[1] == 51 && oct[2] == 100) ||
        (oct[0] == 203 && oct[1] == 0 && oct[2] == 113))
        return 0;
    if (!has_ctx(c, CTX_IP, *b, *e, 30, 0)) return 0;
    *score = -(float)PII_OTHER - 1; /* re-label: see scan loop */
    return 1;
}

static int ck_date(const scan_ctx *c, size_t *b, size_t *e, float *score) {
    const char *s = c->s + *b;
    size_t n = *e - *b;
    if (isdigit((unsigned char)s[0]) && strpbrk(s, "./-") && (size_t)(strpbrk(s, "./-") - s) < n) {
        int lens[4];
        int g = digit_groups(s, n, lens, 4);
        if (g == 3 && !memchr(s, ' ', n)) {
            int v[3];
            if (sscanf(s, "%d%*[./-]%d%*[./-]%d", &v[0], &v[1], &v[2]) != 3) return 0;
            int y, m, d;
            if (lens[0] == 4) { y = v[0]; m = v[1]; d = v[2]; }
            else if (lens[2] == 4 || lens[2] == 2) { y = v[2]; m = v[1]; d = v[0]; if (m > 12) { int t = m; m = d; d = t; } }
            else return 0;
            if (m < 1 || m > 12 || d < 1 || d > 31 || (lens[0] == 4 && (y < 1900 || y > 2100))) return 0;
            if (lens[0] != 4 && lens[2] == 4 && (y < 1900 || y > 2100)) return 0;
            if (lens[0] == 4 && lens[2] == 4) return 0;
        }
    }
    return has_ctx(c, CTX_BIRTH, *b, *e, 48, 12);
}

static int ck_card(const scan_ctx *c, size_t *b, size_t *e, float *score) {
    const char *s = c->s + *b;
    size_t n = *e - *b;
    if (!pii_luhn_ok(s, n)) return 0;
    /* The payment networks' published test numbers (4111 1111 1111 1111, ...) are NOT exempt: they
     * look exactly like real ones, the gate cannot tell a sandbox paste from a real card, and
     * masking one costs nothing. */
    /* separators, when present, must group consistently (4-4-4-4, 4-6-5, ...) */
    int lens[8];
    int g = digit_groups(s, n, lens, 8);
    if (g > 1) {
        int ok = g <= 5 && lens[0] == 4;
        for (int i = 1; i < g - 1 && i < 8; i++) ok &= lens[i] >= 4 && lens[i] <= 6;
        if (!ok) return 0;
    } else if (!has_ctx(c, CTX_CARD, *b, *e, 40, 0) && !has_ctx(c, CTX_ACCOUNT, *b, *e, 40, 0)) {
        *score = 0.7f; /* a bare Luhn-valid number with a card prefix: lower confidence */
    }
    return 1;
}

static int ck_iban(const scan_ctx *c, size_t *b, size_t *e, float *score) {
    /* the candidate may run into a following word (... 00 BIC): try shorter ends at alnum boundaries */
    for (size_t end = *e; end > *b + 14; end--) {
        char ch = c->s[end - 1];
        if (!isalnum((unsigned char)ch)) continue;
        if (end < *e && isalnum((unsigned char)c->s[end])) {
            /* only cut at a space (group boundary) */
            continue;
        }
        if (pii_iban_ok(c->s + *b, end - *b)) {
            *e = end;
            return 1;
        }
    }
    return 0;
}

static int ck_ssn(const scan_ctx *c, size_t *b, size_t *e, float *score) {
    const char *s = c->s + *b;
    size_t n = *e - *b;
    if (!pii_us_ssn_ok(s, n)) return 0;
    int space = memchr(s, ' ', n) != NULL;
    if (space && !has_ctx(c, CTX_ACCOUNT, *b, *e, 40, 0)) return 0;
    /* mixed separators (123-45 6789) are not an SSN layout */
    if (s[3] != s[6]) return 0;
    return 1;
}

static int ck_nino(const scan_ctx *c, size_t *b, size_t *e, float *score) { return pii_uk_nino_ok(c->s + *b, *e - *b); }
static int ck_dni(const scan_ctx *c, size_t *b, size_t *e, float *score) { return pii_es_dni_ok(c->s + *b, *e - *b); }
static int ck_cf(const scan_ctx *c, size_t *b, size_t *e, float *score) {
    char up[17];
    if (*e - *b != 16) return 0;
    for (int i = 0; i < 16; i++) up[i] = (char)toupper((unsigned char)c->s[*b + i]);
    up[16] = 0;
    return pii_it_cf_ok(up, 16);
}
static int ck_nir(const scan_ctx *c, size_t *b, size_t *e, float *score) { return pii_fr_nir_ok(c->s + *b, *e - *b); }
static int ck_pesel(const scan_ctx *c, size_t *b, size_t *e, float *score) {
    return pii_pl_pesel_ok(c->s + *b, *e - *b) && has_ctx(c, CTX_PESEL, *b, *e, 40, 0);
}
static int ck_cpf(const scan_ctx *c, size_t *b, size_t *e, float *score) {
    const char *s = c->s + *b;
    size_t n = *e - *b;
    if (!pii_br_cpf_ok(s, n)) return 0;
    int formatted = n == 14 && s[3] == '.' && s[7] == '.' && s[11] == '-';
    return formatted || ci_has(c->s + (*b > 40 ? *b - 40 : 0), *b > 40 ? 40 : *b, "cpf");
}
static int ck_cn_rid(const scan_ctx *c, size_t *b, size_t *e, float *score) { return pii_cn_rid_ok(c->s + *b, *e - *b); }
static int ck_bsn(const scan_ctx *c, size_t *b, size_t *e, float *score) {
    return pii_nl_bsn_ok(c->s + *b, *e - *b) && has_ctx(c, CTX_BSN, *b, *e, 40, 0);
}
static int ck_se_pnr(const scan_ctx *c, size_t *b, size_t *e, float *score) { return pii_se_pnr_ok(c->s + *b, *e - *b); }

/* An ID-like token right after an account/ID context word ("Konto-Nr.: 1234 5678 90"). */
static int ck_account_ctx(const scan_ctx *c, size_t *b, size_t *e, float *score) {
    const char *s = c->s + *b;
    size_t n = *e - *b;
    while (n && s[n - 1] == ' ') n--, (*e)--;
    int nd = count_digits(s, n);
    if (nd < 5 || n < 6) return 0;
    int alpha = 0;
    for (size_t i = 0; i < n; i++) alpha += isalpha((unsigned char)s[i]) != 0;
    if (nd < 6 && alpha == 0) return 0;
    /* years, dates, times and amounts are not identifiers */
    if (nd == 4 && alpha == 0) return 0;
    /* the context word must be close: up to 32 bytes before, with only a label-ish gap */
    size_t lo = *b > 32 ? back_to_char(c->s, *b - 32) : 0;
    int rc = pcre2_match(g_ctx[CTX_ACCOUNT], (PCRE2_SPTR)(c->s + lo), *b - lo, 0, PCRE2_NO_UTF_CHECK, c->md, c->mc);
    if (rc <= 0) return 0;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
    /* between the context word and the value only a label may stand ("number", "Nr.", "is",
     * "#", ":"): "tax 6% included), order #123" is not a tax number */
    size_t gap_lo = lo + ov[1];
    if (*b - gap_lo > 24) return 0;
    static const char *const label_words[] = {"number", "numbers", "no", "nr", "num", "nummer", "numéro", "número", "numero",
                                              "номер", "id", "is", "ist", "est", "es", "è", "é", "to", "code", "holder",
                                              "s", "er", "ens", "e", "o", "a", "de", "del", "di", "van", "der"};
    size_t i = gap_lo;
    while (i < *b) {
        unsigned char ch = (unsigned char)c->s[i];
        if (ch && strchr(" \t:#.-=()'", ch)) { i++; continue; }
        size_t w = i;
        while (w < *b && (isalpha((unsigned char)c->s[w]) || (unsigned char)c->s[w] >= 0x80)) w++;
        if (w == i) return 0;
        int ok = 0;
        for (size_t k = 0; k < LL_ARRAY_LEN(label_words); k++)
            if (w - i == strlen(label_words[k]) && !strncasecmp(c->s + i, label_words[k], w - i)) ok = 1;
        if (!ok) return 0;
        i = w;
    }
    if (is_placeholder(s, n)) return 0;
    return 1;
}

static int ck_jwt(const scan_ctx *c, size_t *b, size_t *e, float *score) { return pii_jwt_ok(c->s + *b, *e - *b); }

static int ck_not_placeholder(const scan_ctx *c, size_t *b, size_t *e, float *score) {
    return !is_placeholder(c->s + *b, *e - *b);
}

static int ck_conn(const scan_ctx *c, size_t *b, size_t *e, float *score) {
    trim_url_tail(c->s, *b, e);
    const char *s = c->s + *b;
    size_t n = *e - *b;
    const char *sch = strstr(s, "://");
    if (!sch || (size_t)(sch - s) > n) return 0;
    const char *u = sch + 3;
    const char *colon = memchr(u, ':', n - (size_t)(u - s));
    const char *at = memchr(u, '@', n - (size_t)(u - s));
    if (!colon || !at || colon > at) return 0;
    if (is_placeholder(colon + 1, (size_t)(at - colon - 1))) return 0;
    return 1;
}

static int ck_key_value(const scan_ctx *c, size_t *b, size_t *e, float *score) {
    const char *s = c->s + *b;
    size_t n = *e - *b;
    while (n && strchr(".)]}>", s[n - 1])) n--, (*e)--;
    if (n < 6) return 0;
    /* "token=..." inside a URL query belongs to the URL (private_url), not a bare secret */
    for (size_t k = *b; k > 0 && *b - k < 512; k--) {
        char ch = c->s[k - 1];
        if (ch == ' ' || ch == '\n' || ch == '\t' || ch == '"' || ch == '\'') break;
        if (ch == '?' || ch == '&') return 0;
    }
    if (is_placeholder(s, n)) return 0;
    /* a value that is a plain word or a code reference (config.password, getPassword()) is not a secret */
    int up = 0, lo = 0, dg = 0, sym = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (isupper(ch)) up++;
        else if (islower(ch)) lo++;
        else if (isdigit(ch)) dg++;
        else sym++;
    }
    if (!up && !dg && !sym) return 0; /* all lower-case letters: prose ("password is required") */
    /* the key as written: the run of word characters before the separator */
    size_t ke = *b;
    for (;;) { /* separators: punctuation, "is"/"ist"/"est"/"es", "è", a full-width colon */
        while (ke > 0 && c->s[ke - 1] && strchr(" \t\"'`:=>", c->s[ke - 1])) ke--;
        static const char *const sep_words[] = {" is", " ist", " est", " es", "è", "："};
        size_t k = 0;
        for (; k < LL_ARRAY_LEN(sep_words); k++) {
            size_t m = strlen(sep_words[k]);
            if (ke >= m && !strncasecmp(c->s + ke - m, sep_words[k], m)) { ke -= m; break; }
        }
        if (k == LL_ARRAY_LEN(sep_words)) break;
    }
    size_t ks = ke;
    while (ks > 0 && (isalnum((unsigned char)c->s[ks - 1]) || c->s[ks - 1] == '_' || c->s[ks - 1] == '-')) ks--;
    const char *key = c->s + ks;
    size_t kn = ke - ks;
    /* token_id, api_key_env, secret_name, tokens: metadata about a secret, not the secret */
    static const char *const meta[] = {"id", "ids", "count", "len", "length", "type", "url", "uri", "path", "file",
                                       "name", "size", "limit", "ttl", "expiry", "expires", "env", "var", "field",
                                       "header", "endpoint", "usage", "budget", "policy", "prefix", "s", "index",
                                       "idx", "num", "max", "min", "format", "hash", "version"};
    for (size_t i = 0; i < LL_ARRAY_LEN(meta); i++) {
        size_t m = strlen(meta[i]);
        if (kn > m && !strncasecmp(key + kn - m, meta[i], m) &&
            (m == 1 ? isalpha((unsigned char)key[kn - 2]) : (key[kn - m - 1] == '_' || key[kn - m - 1] == '-')))
            return 0;
    }
    int pw_key = kn && (ci_has(key, kn, "pass") || ci_has(key, kn, "pwd") || ci_has(key, kn, "pin"));
    if (!up && !sym && !pw_key) return 0; /* a number after "token": an id or a count */
    if (!up && !dg && !pw_key) return 0;  /* lower-case words with dashes: prose ("tokens: llama-server") */
    if (memchr(s, '(', n) || (n > 2 && s[0] == '$')) return 0;
    static const char *const prose[] = {"required", "incorrect", "invalid", "expired", "missing", "stored", "hashed",
                                        "optional", "string", "None", "null"};
    for (size_t i = 0; i < LL_ARRAY_LEN(prose); i++)
        if (n == strlen(prose[i]) && !strncasecmp(s, prose[i], n)) return 0;
    *score = 0.85f;
    return 1;
}

static int ck_entropy(const scan_ctx *c, size_t *b, size_t *e, float *score) {
    const char *s = c->s + *b;
    size_t n = *e - *b;
    if (n < 20) return 0;
    if (is_hex(s, n)) return 0; /* hashes, commit ids, UUIDs */
    int up = 0, lo = 0, dg = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        up += isupper(ch) != 0;
        lo += islower(ch) != 0;
        dg += isdigit(ch) != 0;
    }
    if (!up || !lo || !dg) return 0;
    /* identifiers and paths (snake_case, kebab-case, a/b/c) have long runs of letters */
    int run = 0, max_run = 0, seps = 0;
    for (size_t i = 0; i < n; i++) {
        if (isalpha((unsigned char)s[i])) { run++; if (run > max_run) max_run = run; }
        else run = 0;
        seps += s[i] == '/' || s[i] == '_' || s[i] == '-';
    }
    if (max_run > 12 || seps > (int)n / 6 || seps >= 3) return 0;
    /* model and package names (org/Model-7B) are paths with dashes, not keys */
    if (memchr(s, '/', n) && memchr(s, '-', n)) return 0;
    double h = pii_entropy(s, n);
    if (h < 4.0) return 0;
    if (is_placeholder(s, n)) return 0;
    if (!has_ctx(c, CTX_SECRET, *b, *e, 60, 0)) {
        if (n < 32 || h < 4.5) return 0;
        *score = 0.6f;
    }
    return 1;
}

/* The value after an "Address:" label runs to the end of the line; cut it after the last house
 * number, or after the postcode and city that follow it, and before a new "Label:". */
static int ck_trim_value(const scan_ctx *c, size_t *b, size_t *e, float *score) {
    const char *s = c->s;
    if ((unsigned char)s[*b] >= 0xE3) {
        /* CJK: no spaces. The address ends where a CJK character follows its last number run
         * (house numbers: 1丁目2-3, 982号, 12室) */
        static const char *const suffix[] = {"丁目", "番地", "番", "号", "室", "楼", "階", "층", "호", "번지", "-", "－"};
        int in_num = 0;
        size_t i = *b;
        while (i < *e) {
            unsigned char ch = (unsigned char)s[i];
            if (isdigit(ch)) { in_num = 1; i++; continue; }
            size_t k = 0;
            for (; k < LL_ARRAY_LEN(suffix); k++)
                if (!strncmp(s + i, suffix[k], strlen(suffix[k]))) break;
            if (in_num && k < LL_ARRAY_LEN(suffix)) { i += strlen(suffix[k]); continue; }
            if (in_num || ch == ' ') break;
            int l = pii_utf8_len((const unsigned char *)s + i, *e - i);
            i += l ? (size_t)l : 1;
        }
        if (!in_num) return 0;
        *e = i;
        return 1;
    }
    size_t i = *b, best_end = 0;
    int tokens = 0, last_postcode = 0, numbers = 0;
    while (i < *e && tokens < 14) {
        while (i < *e && s[i] == ' ') i++;
        size_t w = i;
        while (w < *e && s[w] != ' ') w++;
        if (w == i) break;
        if (s[w - 1] == ':') break; /* the next "Label:" */
        int nd = count_digits(s + i, w - i);
        size_t t = w;
        while (t > i && strchr(",.;", s[t - 1])) t--;
        if (nd) {
            best_end = t;
            /* a number after the house number is a postcode; a city may follow it */
            last_postcode = ++numbers >= 2;
        } else if (best_end && last_postcode && (unsigned char)s[i] >= 0x80 ? 1 : (best_end && last_postcode && isupper((unsigned char)s[i]))) {
            /* the city after a postcode (after a two-letter suffix too: 1012 AB Amsterdam) */
            best_end = t;
            if (!(w - i == 2 && isupper((unsigned char)s[i]) && isupper((unsigned char)s[i + 1]))) last_postcode = 0;
            if (t < w) break;
        } else if (best_end) {
            break;
        }
        tokens++;
        i = w;
    }
    if (!best_end) return 0;
    *e = best_end;
    return *e - *b >= 6 && !is_placeholder(c->s + *b, *e - *b);
}

static int ck_person(const scan_ctx *c, size_t *b, size_t *e, float *score) {
    const char *s = c->s + *b;
    size_t n = *e - *b;
    static const char *const stop[] = {"Team", "All", "Everyone", "World", "There", "Sir", "Madam", "Folks", "Guys",
                                       "Friends", "Support", "Customer", "Admin", "Everybody", "Colleagues", "Community",
                                       "Hiring Manager", "User", "Users", "Developer", "Developers", "Alle", "Tous",
                                       "Todos", "Tutti", "Allemaal", "Claude", "ChatGPT", "Assistant", "Google", "Thanks",
                                       "Again", "Regards", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday",
                                       "Saturday", "Sunday", "January", "Python", "Java", "Linux", "Windows", "The", "This",
                                       "That", "It", "Bot", "Siri", "Alexa", "Morning", "Evening", "Afternoon", "Day",
                                       "Markdown", "Please", "Sorry", "Note", "Best", "Kind", "Warm"};
    /* the first word must not be a stop word */
    size_t w = 0;
    while (w < n && s[w] != ' ' && s[w] != '\t') w++;
    for (size_t i = 0; i < LL_ARRAY_LEN(stop); i++)
        if (w == strlen(stop[i]) && !strncmp(s, stop[i], w)) return 0;
    for (size_t i = 0; i < LL_ARRAY_LEN(stop); i++)
        if (n == strlen(stop[i]) && !strncmp(s, stop[i], n)) return 0;
    /* trailing stop words ("Anna Thanks") are cut */
    return n >= 2;
}

static int ck_mac(const scan_ctx *c, size_t *b, size_t *e, float *score) {
    const char *s = c->s + *b;
    /* all-zero / broadcast / documentation-like addresses are not device identifiers */
    if (!strncasecmp(s, "00:00:00:00:00:00", 17) || !strncasecmp(s, "ff:ff:ff:ff:ff:ff", 17) ||
        !strncasecmp(s, "00-00-00-00-00-00", 17))
        return 0;
    /* consistent separators */
    return s[2] == s[5] && s[5] == s[8];
}

static int ck_user(const scan_ctx *c, size_t *b, size_t *e, float *score) {
    while (*e > *b && c->s[*e - 1] == '.') (*e)--;
    const char *s = c->s + *b;
    size_t n = *e - *b;
    if (n < 3 || is_placeholder(s, n)) return 0;
    static const char *const common[] = {"admin", "root", "user", "guest", "test", "required", "optional", "string",
                                         "none", "null", "name", "login", "password", "email"};
    for (size_t i = 0; i < LL_ARRAY_LEN(common); i++)
        if (n == strlen(common[i]) && !strncasecmp(s, common[i], n)) return 0;
    return 1;
}

static int ck_imei(const scan_ctx *c, size_t *b, size_t *e, float *score) {
    /* 15 digits with a Luhn check digit (no issuer prefix, unlike cards) */
    int sum = 0;
    for (int i = 0; i < 15; i++) {
        int v = c->s[*b + 14 - i] - '0';
        if (i & 1) { v *= 2; if (v > 9) v -= 9; }
        sum += v;
    }
    return sum % 10 == 0 && has_ctx(c, CTX_IMEI, *b, *e, 30, 0);
}

/* ---- the scan ---- */

/* Copy of text with every byte of an invalid UTF-8 sequence (and NUL) replaced by 0x1A, so byte
 * offsets are unchanged and PCRE2 can run without per-call UTF checks. */
static char *sanitize(const char *text, size_t n) {
    char *s = ll_malloc(n + 1);
    if (!s) return NULL;
    const unsigned char *u = (const unsigned char *)text;
    for (size_t i = 0; i < n;) {
        int l = pii_utf8_len(u + i, n - i);
        if (l == 0 || u[i] == 0) {
            s[i++] = 0x1A;
        } else {
            memcpy(s + i, text + i, (size_t)l);
            i += (size_t)l;
        }
    }
    s[n] = 0;
    return s;
}

/* 1 if the text contains one of the '|'-separated literals of `need`. */
static int text_has_any(const scan_ctx *c, const char *need) {
    while (*need) {
        const char *bar = strchr(need, '|');
        size_t l = bar ? (size_t)(bar - need) : strlen(need);
        if (l && memmem(c->s, c->n, need, l)) return 1;
        if (!bar) break;
        need = bar + 1;
    }
    return 0;
}

static ll_status run_rule(scan_ctx *c, size_t r, pii_spans *out) {
    const rule_def *rd = &k_rules[r];
    if (rd->need && !text_has_any(c, rd->need)) return LL_OK;
    /* e-mail: the pattern can only match around an '@', so each search starts at most one
     * local part (64 characters, 256 bytes) before the next '@' instead of at every letter */
    const int at_anchor = rd->check == ck_email;
    size_t off = 0;
    while (off < c->n) {
        size_t from = off;
        if (at_anchor) {
            const char *at = memchr(c->s + off, '@', c->n - off);
            if (!at) break;
            size_t p = (size_t)(at - c->s);
            from = p > off + 256 ? back_to_char(c->s, p - 256) : off;
        }
        int rc = pcre2_match(g_code[r], (PCRE2_SPTR)c->s, c->n, from, PCRE2_NO_UTF_CHECK, c->md, c->mc);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            /* match/depth limit or other runtime error: skip one character, keep scanning */
            off = from + 1;
            while (off < c->n && ((unsigned char)c->s[off] & 0xC0) == 0x80) off++;
            continue;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
        size_t mb = ov[0], me = ov[1];
        size_t b = mb, e = me;
        if (rd->group > 0) {
            if (rc <= rd->group || ov[2 * rd->group] == PCRE2_UNSET) { off = me > mb ? me : mb + 1; continue; }
            b = ov[2 * rd->group];
            e = ov[2 * rd->group + 1];
        }
        size_t next = me > mb ? me : mb + 1;
        float score = rd->score;
        int cat = rd->cat;
        if (e > b && (!rd->check || rd->check(c, &b, &e, &score))) {
            if (score < 0) { /* a check re-labelled the span */
                cat = (int)(-score) - 1;
                score = 0.6f;
            }
            if (e > b) {
                pii_span sp = {0, 0, (int64_t)b, (int64_t)e, cat, score, PII_SRC_RULE};
                LL_TRY(pii_spans_push(out, sp));
            }
        } else if (rd->group == 0 && me - mb > 1 && me - mb <= 40) {
            /* rejected: retry from the next character so a valid candidate starting inside this
             * one (e.g. a phone number after a rejected prefix) is not lost. Only for short
             * candidates, which bounds the rescanning at 40 searches per rejection. */
            next = mb + 1;
            while (next < c->n && ((unsigned char)c->s[next] & 0xC0) == 0x80) next++;
        }
        off = next;
    }
    return LL_OK;
}

ll_status pii_rules_scan(const char *text, size_t n, pii_spans *out) {
    pthread_once(&g_once, init_patterns);
    if (g_init_status) return ll_err(g_init_status, "%s", g_init_msg);
    scan_ctx c = {0};
    c.n = n;
    char *s = sanitize(text, n);
    if (!s) return ll_err(LL_ERR_OOM, "privacy: out of memory for a %zu-byte text", n);
    c.s = s;
    c.md = pcre2_match_data_create(20, NULL);
    c.mc = pcre2_match_context_create(NULL);
    ll_status st = LL_OK;
    if (!c.md || !c.mc) {
        st = ll_err(LL_ERR_OOM, "privacy: out of memory for PCRE2 match data");
        goto done;
    }
    pcre2_set_match_limit(c.mc, 200000);
    pcre2_set_depth_limit(c.mc, 2000);
    pcre2_set_heap_limit(c.mc, 4096); /* KiB */
    pii_spans found = {0};
    for (size_t r = 0; r < N_RULES && st == LL_OK; r++) st = run_rule(&c, r, &found);
    if (st == LL_OK) st = pii_spans_resolve(&found);
    for (size_t i = 0; st == LL_OK && i < found.n; i++) st = pii_spans_push(out, found.v[i]);
    pii_spans_free(&found);
    if (st == LL_OK) pii_spans_set_cp(out, text, n);
done:
    pcre2_match_data_free(c.md);
    pcre2_match_context_free(c.mc);
    ll_free(s);
    return st;
}
