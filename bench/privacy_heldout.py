#!/usr/bin/env python3
"""privacy_heldout.py — a small hand-written held-out set for the privacy rules.

Written after the rules were tuned on bench/privacy_gen.py, by the same engineer, with templates
that generator does not use (e-mail signatures, ticket exports, CSV rows, config files, chat
logs, forms) in eight languages. It was used once to find what the rules miss; the fixes were
then made and both numbers are in bench/results/privacy.md. It is NOT independent of the person
who wrote the rules, only of the tuning set. Two labelling slips were corrected after the first
run, before any rule changed: a card number that failed Luhn (not a card) and a title inside a
person span (the tuning set leaves titles out).

Markup: {X|value} marks a value of category X (P person, E e-mail, T phone, A address, U private
URL, D personal date, N account/ID number, S secret, O other PII). Output: the JSON Lines format
of privacy_gen.py (code point offsets).

Usage: privacy_heldout.py > heldout.jsonl
"""
import json
import re
import sys

LABEL = {"P": "private_person", "E": "private_email", "T": "private_phone", "A": "private_address",
         "U": "private_url", "D": "private_date", "N": "account_number", "S": "secret", "O": "other_pii"}

PII = [
    ("en", "Best regards,\n{P|Harriet Okafor}\nSenior Buyer, Linwood Textiles Ltd\n{E|h.okafor@linwood-textiles.co.uk} | {T|+44 161 496 0732}"),
    ("en", "Ticket #88213 opened by {E|raj.patel@quantbridge.io}: cannot log in since Tuesday."),
    ("en", "Please charge the deposit to card {N|4111 1111 1111 1111}, exp 09/28."),
    ("en", "For the sandbox use {N|4242 4242 4242 4242} but for the live booking my card is {N|5425 2334 3010 9903}."),
    ("en", "customer_id,name,email\n10442,{P|Maeve Donnelly},{E|maeve.donnelly@corkfreight.ie}"),
    ("en", "Ship it to {A|221 Harbour View Road, Portsmouth, NH 03801} and text me at {T|(603) 555-0148}."),
    ("en", "My date of birth is {D|14/03/1986}, policy holder {P|Gareth Lewis}."),
    ("en", "export DB_URL={S|postgres://svc_report:Tr0ub4dor&3x@db.prod.lan:5432/sales}"),
    ("en", "I forwarded it to my personal address {E|dkowalski77@gmx.net} so I can read it at home."),
    ("en", "The contractor's e-mail is {E|l.moreau@atelier-moreau.fr}, phone {T|+33 6 12 34 56 78}."),
    ("de", "Mit freundlichen Grüßen\n{P|Katrin Vogelsang}\nVertrieb, Hansen & Söhne GmbH\nTel. {T|+49 40 3861 2207}\n{E|k.vogelsang@hansen-soehne.de}"),
    ("de", "Bitte überweisen Sie den Betrag auf {N|DE89 3704 0044 0532 0130 00} bis Freitag."),
    ("de", "Lieferadresse: {A|Kastanienallee 17, 10435 Berlin}"),
    ("de", "Hallo {P|Jürgen}, meine neue Mail ist {E|juergen.brandt@posteo.de}."),
    ("de", "Testkarte {N|4111 1111 1111 1111} funktioniert im Staging nicht mehr."),
    ("fr", "Cordialement,\n{P|Sylvie Marchand}\n{E|sylvie.marchand@cabinet-marchand.fr}\n{T|01 42 68 53 00}"),
    ("fr", "Mon adresse : {A|12 rue des Lilas, 69003 Lyon}"),
    ("fr", "Le client M. {P|Olivier Garnier} a payé avec la carte {N|4970 1012 3456 7893}."),
    ("es", "Un saludo,\n{P|Rocío Fernández}\nDpto. de Compras — {E|rfernandez@grupoalbor.es}"),
    ("es", "Envíalo a {A|Calle de Alcalá 145, 28009 Madrid}, por favor."),
    ("es", "Mi teléfono es {T|+34 612 345 678} y mi correo {E|pablo.ibarra@telefonica.net}."),
    ("it", "Cordiali saluti,\n{P|Alessia Conti}\n{E|alessia.conti@studiolegaleconti.it}\nCell. {T|+39 347 123 4567}"),
    ("it", "Il codice fiscale del paziente è {N|RSSMRA85M01H501Q}."),
    ("nl", "Met vriendelijke groet,\n{P|Joost Hendriks}\n{E|joost.hendriks@vanderlinde-advocaten.nl}"),
    ("nl", "Stuur de factuur naar {A|Prinsengracht 263, 1016 GV Amsterdam}."),
    ("pt", "Atenciosamente,\n{P|Thiago Moreira}\n{E|thiago.moreira@construtoraviga.com.br}"),
    ("pt", "Meu CPF é {N|529.982.247-25} e meu celular {T|+55 11 91234-5678}."),
    ("pl", "Pozdrawiam,\n{P|Marta Zielińska}\n{E|m.zielinska@biuro-rachunkowe.pl}, tel. {T|+48 601 234 567}"),
    ("en", "git log: Author: {P|Tomasz Wrona} <{E|tomasz.wrona@kodlab.pl}>"),
    ("en", "[{E|sven.lindqvist@nordkraft.se}] joined the channel."),
    ("en", "config.yaml:\n  smtp:\n    user: {E|alerts@ridgeline-ops.com.au}\n    password: {S|Vx9!qLr2#pWm}"),
    ("en", "aws_secret_access_key = {S|wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ8n2Rk4Ab}"),
    ("en", "Patient: {P|Lorna Baptiste}, DOB {D|1979-11-02}, MRN {N|00482913}"),
    ("en", "Contact our new hire at {E|a.nakamura@tsubame-robotics.jp} starting Monday."),
    ("en", "Can you update the vendor record? IBAN {N|GB33 BUKB 2020 1555 5555 55}, contact {E|ap@meridianfoods.co.uk}"),
    ("en", "Amex on file: {N|3714 496353 98431}."),
    ("ja", "担当：{P|佐藤 健}\nメール：{E|k.sato@hikari-denki.co.jp}\n電話：{T|03-5412-7788}"),
    ("de", "Die Rechnung geht an {E|buchhaltung.nord@stadtwerke-kiel.de}, Kundennummer 44817."),
    ("fr", "Voici ma carte de test {N|5555 5555 5555 4444} pour la démo."),
    ("en", "Visa ending 1881: {N|4012 8888 8888 1881}"),
]

CLEAN = [
    ("en", "Release 2.14.3 fixes the memory leak reported in #4412; sha 9f3c2e1 on main."),
    ("en", "The invoice total is 1,249.00 EUR, due 2025-07-31, order number ORD-2025-00417."),
    ("en", "Send feedback to the address in the README; do not post logs in the issue tracker."),
    ("en", "Use a placeholder like user@example.com in the documentation, never a real one."),
    ("de", "Die Besprechung ist am 12.05.2025 um 14:00 Uhr im Raum 3.14."),
    ("de", "Version 3.2.1 unterstützt jetzt UTF-8 in allen Feldern; siehe Changelog."),
    ("fr", "La réunion est déplacée au mardi 4 mars 2025, salle B."),
    ("es", "El pedido 778120 llegará en 3-5 días hábiles."),
    ("it", "Il modello ha 35 miliardi di parametri e 3 miliardi attivi per token."),
    ("nl", "De build duurt 12 minuten op 2 cores; cache hit rate 87%."),
    ("pt", "A versão 1.4.0 foi publicada em 2024-09-12 com correções de segurança."),
    ("pl", "Spotkanie zespołu odbędzie się w czwartek o 10:30."),
    ("en", "The timestamp 1717171717 is in seconds since the epoch; 1717171717000 in ms."),
    ("en", "Docker image ghcr.io/acme/tool:1.2.3 with digest sha256:3b1f0a9c7d."),
    ("en", "Set max_tokens to 4096 and temperature to 0.7 for this benchmark run."),
    ("ja", "次回の会議は来週の水曜日です。資料は共有フォルダにあります。"),
    ("en", "Tracking number 1Z 999 AA1 0123 4567 84 was delivered to the front desk."),
    ("en", "Error code 0x80070005 means access denied; retry with elevated rights."),
    ("de", "Preis: 19,99 € inkl. MwSt., Artikelnummer 4006381333931."),
    ("en", "See https://docs.python.org/3/library/re.html for the regex syntax."),
]


def parse(src):
    text, spans, pos = [], [], 0
    for m in re.finditer(r"\{([PETAUDNSO])\|([^}]*)\}", src):
        text.append(src[pos:m.start()])
        start = sum(len(t) for t in text)
        text.append(m.group(2))
        spans.append({"start": start, "end": start + len(m.group(2)), "label": LABEL[m.group(1)]})
        pos = m.end()
    text.append(src[pos:])
    return "".join(text), spans


def main():
    for kind, docs in (("pii", PII), ("clean", CLEAN)):
        for i, (lang, src) in enumerate(docs):
            text, spans = parse(src)
            assert kind == "pii" or not spans
            rec = {"id": f"heldout-{kind}-{i:03d}", "lang": lang, "kind": kind, "text": text, "spans": spans}
            sys.stdout.write(json.dumps(rec, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
