#!/usr/bin/env python3
"""privacy_gen.py — deterministic generator of lilac's labelled synthetic PII evaluation set.

Writes JSON Lines, one document per line:
  {"id": str, "lang": str, "kind": "pii" | "clean" | "long", "text": str,
   "spans": [{"start": S, "end": E, "label": L}]}
with start/end in Unicode code points (Python str indices), end exclusive, labels in PII-Tracer's
nine categories. Every value is synthetic and valid for its format (Luhn cards, mod-97 IBANs,
checksummed national IDs), so validators see realistic data.

Kinds:
  pii    short conversations (1-6 sentences) in 13 languages mixing PII sentences and filler;
  clean  PII-free documents built from hard negatives (versions, hashes, timestamps, prices,
         public URLs, example placeholders, code, order numbers, dates without a personal context);
  long   10K+ character documents where the same identifiers recur across many paragraphs.

Usage: privacy_gen.py [--seed N] [--scale K] > set.jsonl   (same seed and scale: same bytes)
"""
import argparse
import json
import random
import string

LANGS = ["en", "de", "fr", "es", "it", "nl", "pt", "ru", "pl", "sv", "ja", "zh", "ko"]

FIRST = {
    "en": ["James", "Mary", "Robert", "Jennifer", "Michael", "Linda", "David", "Sarah", "Emily", "Thomas"],
    "de": ["Lukas", "Anna", "Jonas", "Lena", "Felix", "Sophie", "Stefan", "Sabine", "Klaus", "Monika"],
    "fr": ["Pierre", "Camille", "Louis", "Chloé", "Nicolas", "Manon", "Mathieu", "Isabelle", "Jean", "Élodie"],
    "es": ["Juan", "Lucía", "Carlos", "María", "Javier", "Carmen", "Miguel", "Sofía", "Alejandro", "Valentina"],
    "it": ["Marco", "Giulia", "Giuseppe", "Chiara", "Luca", "Francesca", "Matteo", "Federica", "Giovanni", "Alessandro"],
    "nl": ["Pieter", "Sanne", "Daan", "Femke", "Bram", "Anna", "Jan", "Emma", "Lars", "Julia"],
    "pt": ["João", "Ana", "Pedro", "Beatriz", "Tiago", "Mariana", "Gabriel", "Larissa", "Rafael", "Fernanda"],
    "ru": ["Иван", "Ольга", "Сергей", "Елена", "Алексей", "Татьяна", "Дмитрий", "Наталья", "Андрей", "Мария"],
    "pl": ["Piotr", "Agnieszka", "Krzysztof", "Katarzyna", "Tomasz", "Magdalena", "Anna", "Jan", "Julia", "Paul"],
    "sv": ["Erik", "Ingrid", "Lars", "Astrid", "Anders", "Karin", "Johan", "Emma", "Lena", "Felix"],
    "ja": ["翔太", "陽菜", "大輝", "美咲", "拓海", "結衣"],
    "zh": ["伟", "芳", "娜", "敏", "静", "磊"],
    "ko": ["민준", "서연", "지훈", "하은", "도윤", "지우"],
}
LAST = {
    "en": ["Smith", "Johnson", "Williams", "Brown", "Miller", "Davis", "Wilson", "Taylor", "Clarke", "Walker"],
    "de": ["Müller", "Schmidt", "Schneider", "Fischer", "Weber", "Becker", "Hoffmann", "Schäfer", "Koch", "Wagner"],
    "fr": ["Martin", "Bernard", "Dubois", "Lefèvre", "Moreau", "Laurent", "Girard", "Roux", "Fontaine", "Garnier"],
    "es": ["García", "Fernández", "López", "Martínez", "Sánchez", "Romero", "Navarro", "Torres", "Ruiz", "Moreno"],
    "it": ["Rossi", "Russo", "Ferrari", "Esposito", "Bianchi", "Romano", "Colombo", "Ricci", "Marino", "Greco"],
    "nl": ["Jansen", "Bakker", "Visser", "Smit", "Meijer", "Mulder", "Bos", "Vos", "Peters", "Hendriks"],
    "pt": ["Silva", "Santos", "Oliveira", "Souza", "Pereira", "Costa", "Ferreira", "Almeida", "Carvalho", "Gomes"],
    "ru": ["Иванов", "Смирнова", "Кузнецов", "Попова", "Соколов", "Лебедева", "Козлов", "Новикова", "Морозов", "Волкова"],
    "pl": ["Nowak", "Kowalski", "Wiśniewska", "Wójcik", "Kowalczyk", "Kamiński", "Lewandowska", "Zieliński", "Szymańska", "Dąbrowski"],
    "sv": ["Andersson", "Johansson", "Karlsson", "Nilsson", "Eriksson", "Larsson", "Olsson", "Persson", "Svensson", "Gustafsson"],
    "ja": ["佐藤", "鈴木", "高橋", "田中", "渡辺", "伊藤"],
    "zh": ["王", "李", "张", "刘", "陈", "杨"],
    "ko": ["김", "이", "박", "최", "정", "강"],
}
TRANSLIT = {"ru": ["ivan", "olga", "sergey", "elena", "alexey", "tatiana"], "ja": ["shota", "hina", "daiki", "misaki"],
            "zh": ["wei", "fang", "na", "min", "jing", "lei"], "ko": ["minjun", "seoyeon", "jihoon", "haeun"]}
MAILDOM = {"en": ["gmail.com", "outlook.com", "yahoo.com", "hotmail.co.uk"], "de": ["web.de", "gmx.de", "t-online.de"],
           "fr": ["orange.fr", "free.fr", "laposte.net"], "es": ["yahoo.es", "telefonica.net", "gmail.com"],
           "it": ["libero.it", "virgilio.it", "tiscali.it"], "nl": ["ziggo.nl", "kpnmail.nl", "hetnet.nl"],
           "pt": ["uol.com.br", "sapo.pt", "bol.com.br"], "ru": ["yandex.ru", "mail.ru", "rambler.ru"],
           "pl": ["wp.pl", "onet.pl", "interia.pl"], "sv": ["telia.se", "bredband.net", "spray.se"],
           "ja": ["docomo.ne.jp", "yahoo.co.jp", "ezweb.ne.jp"], "zh": ["qq.com", "163.com", "sina.com"],
           "ko": ["naver.com", "daum.net", "kakao.com"]}
COMPANY = ["brightlane-consulting.com", "nordhafen-logistik.de", "atelier-roux.fr", "viveros-navarro.es",
           "studio-greco.it", "bakkerij-smit.nl", "construtora-gomes.com.br"]


def luhn_complete(prefix_digits):
    digits = [int(c) for c in prefix_digits] + [0]
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return prefix_digits + str((10 - total % 10) % 10)


IBAN_LEN = {"DE": 22, "FR": 27, "ES": 24, "IT": 27, "NL": 18, "PT": 25, "PL": 28, "SE": 24, "GB": 22, "BE": 16, "AT": 20, "CH": 21}


def iban(r, cc):
    n = IBAN_LEN[cc]
    if cc == "NL":
        bban = "".join(r.choice(string.ascii_uppercase) for _ in range(4)) + "".join(r.choice(string.digits) for _ in range(10))
    elif cc == "GB":
        bban = "".join(r.choice(string.ascii_uppercase) for _ in range(4)) + "".join(r.choice(string.digits) for _ in range(14))
    else:
        bban = "".join(r.choice(string.digits) for _ in range(n - 4))
    num = "".join(str(int(ch, 36)) for ch in bban + cc + "00")
    chk = 98 - int(num) % 97
    raw = cc + "%02d" % chk + bban
    return " ".join(raw[i:i + 4] for i in range(0, len(raw), 4))


def card(r):
    kind = r.choice(["visa", "mc", "amex", "visa", "mc"])
    if kind == "visa":
        d = luhn_complete("4" + "".join(r.choice(string.digits) for _ in range(14)))
    elif kind == "mc":
        d = luhn_complete(str(r.randint(51, 55)) + "".join(r.choice(string.digits) for _ in range(13)))
    else:
        d = luhn_complete(r.choice(["34", "37"]) + "".join(r.choice(string.digits) for _ in range(12)))
        return d[:4] + " " + d[4:10] + " " + d[10:] if r.random() < 0.7 else d
    sep = r.choice([" ", "-", " ", ""])
    return sep.join(d[i:i + 4] for i in range(0, 16, 4))


def ssn(r):
    return "%03d-%02d-%04d" % (r.randint(100, 665), r.randint(1, 99), r.randint(1, 9999))


def dni(r):
    v = r.randint(10000000, 99999999)
    return "%08d%s" % (v, "TRWAGMYFPDXBNJZSQVHLCKE"[v % 23])


def cpf(r):
    d = [r.randint(0, 9) for _ in range(9)]
    for j in (9, 10):
        s = sum(d[i] * (j + 1 - i) for i in range(j))
        d.append((s * 10) % 11 % 10)
    s = "".join(map(str, d))
    return "%s.%s.%s-%s" % (s[:3], s[3:6], s[6:9], s[9:])


def pesel(r):
    d = [r.randint(5, 9), r.randint(0, 9), 0, r.randint(1, 9), r.randint(1, 2), r.randint(0, 8)] + [r.randint(0, 9) for _ in range(4)]
    w = [1, 3, 7, 9, 1, 3, 7, 9, 1, 3]
    d.append((10 - sum(a * b for a, b in zip(w, d)) % 10) % 10)
    return "".join(map(str, d))


def se_pnr(r):
    d = "%02d%02d%02d%03d" % (r.randint(50, 99), r.randint(1, 12), r.randint(1, 28), r.randint(0, 999))
    return d[:6] + "-" + luhn_complete(d)[6:]


def cn_rid(r):
    d = "110105%04d%02d%02d%03d" % (r.randint(1950, 2004), r.randint(1, 12), r.randint(1, 28), r.randint(0, 999))
    w = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2]
    return d + "10X98765432"[sum(int(a) * b for a, b in zip(d, w)) % 11]


def phone(r, lang):
    dd = lambda k: "".join(r.choice(string.digits) for _ in range(k))
    f = {
        "en": [lambda: "+1 (%d%s) %s-%s" % (r.randint(2, 9), dd(2), dd(3), dd(4)), lambda: "(%d%s) %s-%s" % (r.randint(2, 9), dd(2), dd(3), dd(4)),
               lambda: "+44 20 %s %s" % (dd(4), dd(4)), lambda: "%d%s-%s-%s" % (r.randint(2, 9), dd(2), dd(3), dd(4))],
        "de": [lambda: "+49 30 %s" % dd(8), lambda: "030 %s %s" % (dd(4), dd(4)), lambda: "+49 151 %s" % dd(8), lambda: "0171/%s" % dd(7)],
        "fr": [lambda: "06 %s %s %s %s" % (dd(2), dd(2), dd(2), dd(2)), lambda: "+33 1 %s %s %s %s" % (dd(2), dd(2), dd(2), dd(2)),
               lambda: "07.%s.%s.%s.%s" % (dd(2), dd(2), dd(2), dd(2))],
        "es": [lambda: "+34 6%s %s %s" % (dd(2), dd(3), dd(3)), lambda: "91 %s %s %s" % (dd(3), dd(2), dd(2))],
        "it": [lambda: "+39 3%s %s %s" % (dd(2), dd(3), dd(4)), lambda: "06 %s %s" % (dd(4), dd(4))],
        "nl": [lambda: "+31 6 %s %s" % (dd(4), dd(4)), lambda: "020-%s %s" % (dd(3), dd(4))],
        "pt": [lambda: "+55 11 9%s-%s" % (dd(4), dd(4)), lambda: "+351 91%s %s %s" % (dd(1), dd(3), dd(3))],
        "ru": [lambda: "+7 9%s %s-%s-%s" % (dd(2), dd(3), dd(2), dd(2)), lambda: "8 (495) %s-%s-%s" % (dd(3), dd(2), dd(2))],
        "pl": [lambda: "+48 5%s %s %s" % (dd(2), dd(3), dd(3)), lambda: "22 %s %s %s" % (dd(3), dd(2), dd(2))],
        "sv": [lambda: "+46 70 %s %s %s" % (dd(3), dd(2), dd(2)), lambda: "08-%s %s %s" % (dd(3), dd(2), dd(2))],
        "ja": [lambda: "090-%s-%s" % (dd(4), dd(4)), lambda: "+81 3-%s-%s" % (dd(4), dd(4))],
        "zh": [lambda: "+86 138 %s %s" % (dd(4), dd(4)), lambda: "139%s%s" % (dd(4), dd(4))],
        "ko": [lambda: "010-%s-%s" % (dd(4), dd(4)), lambda: "+82 10-%s-%s" % (dd(4), dd(4))],
    }[lang]
    return r.choice(f)()


def rand_tok(r, n, alphabet=string.ascii_letters + string.digits):
    return "".join(r.choice(alphabet) for _ in range(n))


def secret(r):
    import base64
    k = r.randint(0, 8)
    if k == 0:
        return "AKIA" + rand_tok(r, 16, string.ascii_uppercase + string.digits)
    if k == 1:
        return "ghp_" + rand_tok(r, 36)
    if k == 2:
        return "sk_live_" + rand_tok(r, 24)
    if k == 3:
        return "sk-proj-" + rand_tok(r, 40, string.ascii_letters + string.digits + "_-")
    if k == 4:
        enc = lambda b: base64.urlsafe_b64encode(b).decode().rstrip("=")
        return enc(b'{"alg":"HS256","typ":"JWT"}') + "." + enc(('{"sub":"%d","name":"x"}' % r.randint(1, 99999)).encode()) + "." + rand_tok(r, 43, string.ascii_letters + string.digits + "_-")
    if k == 5:
        return "xoxb-" + "-".join([rand_tok(r, 11, string.digits), rand_tok(r, 12, string.digits), rand_tok(r, 24)])
    if k == 6:
        body = "\n".join(rand_tok(r, 64, string.ascii_letters + string.digits + "+/") for _ in range(4))
        return "-----BEGIN RSA PRIVATE KEY-----\n" + body + "\n-----END RSA PRIVATE KEY-----"
    if k == 7:
        return "postgres://app_%s:%s@db%d.prod.internal:5432/orders" % (rand_tok(r, 4, string.ascii_lowercase), rand_tok(r, 14), r.randint(1, 9))
    return "AIza" + rand_tok(r, 35, string.ascii_letters + string.digits + "_-")


def password(r):
    words = ["Sommer", "Tiger", "Blue", "Lune", "Rosa", "Falcon", "Nebula", "Kirsche"]
    return r.choice(words) + "%d" % r.randint(10, 9999) + r.choice("!#$%&*?@") + rand_tok(r, 3)


def private_url(r, first, last):
    k = r.randint(0, 6)
    fl = (first + last).lower()
    if k == 0:
        return "http://intranet.%s.corp/people/%s" % (r.choice(["acme", "globex", "initech"]), fl)
    if k == 1:
        return "http://10.%d.%d.%d:8080/admin" % (r.randint(0, 255), r.randint(0, 255), r.randint(1, 254))
    if k == 2:
        return "https://docs.google.com/document/d/" + rand_tok(r, 33, string.ascii_letters + string.digits + "_-") + "/edit"
    if k == 3:
        return "https://www.linkedin.com/in/%s-%s-%d" % (first.lower(), last.lower(), r.randint(10, 999))
    if k == 4:
        return "https://portal.example-shop.net/account?email=%s%%40gmail.com&token=%s" % (fl, rand_tok(r, 16))
    if k == 5:
        return "https://us02web.zoom.us/j/%d" % r.randint(10 ** 9, 10 ** 10 - 1)
    return "http://192.168.%d.%d/share/%s" % (r.randint(0, 255), r.randint(1, 254), fl)


ADDR = {
    "en": lambda r: "%d %s %s, %s, %s %05d" % (r.randint(1, 9999), r.choice(["Maple", "Oak", "Cedar", "Lincoln", "Sunset"]), r.choice(["Street", "Avenue", "Road", "Drive", "Lane"]), r.choice(["Springfield", "Portland", "Austin", "Denver"]), r.choice(["IL", "OR", "TX", "CO"]), r.randint(10000, 99999)),
    "de": lambda r: "%s %d, %05d %s" % (r.choice(["Hauptstraße", "Lindenweg", "Bahnhofstraße", "Goethestraße", "Schillerplatz"]), r.randint(1, 150), r.randint(10000, 99999), r.choice(["Berlin", "München", "Hamburg", "Köln"])),
    "fr": lambda r: "%d rue %s, %05d %s" % (r.randint(1, 200), r.choice(["de la Paix", "Victor Hugo", "des Lilas", "du Moulin"]), r.randint(10000, 95999), r.choice(["Paris", "Lyon", "Marseille", "Toulouse"])),
    "es": lambda r: "Calle %s %d, %05d %s" % (r.choice(["Mayor", "de Alcalá", "Serrano", "Gran Vía"]), r.randint(1, 200), r.randint(10000, 52999), r.choice(["Madrid", "Sevilla", "Valencia"])),
    "it": lambda r: "Via %s %d, %05d %s" % (r.choice(["Roma", "Garibaldi", "Mazzini", "Dante"]), r.randint(1, 200), r.randint(10000, 98999), r.choice(["Milano", "Torino", "Bologna"])),
    "nl": lambda r: "%s %d, %04d %s %s" % (r.choice(["Kerkstraat", "Dorpsstraat", "Keizersgracht", "Molenlaan"]), r.randint(1, 300), r.randint(1000, 9999), rand_tok(r, 2, string.ascii_uppercase), r.choice(["Amsterdam", "Utrecht", "Rotterdam"])),
    "pt": lambda r: "Rua %s, %d" % (r.choice(["Augusta", "das Flores", "Oscar Freire", "da Liberdade"]), r.randint(1, 2000)),
    "ru": lambda r: "ул. %s, д. %d, кв. %d" % (r.choice(["Ленина", "Пушкина", "Гагарина", "Садовая"]), r.randint(1, 99), r.randint(1, 300)),
    "pl": lambda r: "ul. %s %d, %02d-%03d %s" % (r.choice(["Marszałkowska", "Długa", "Polna"]), r.randint(1, 99), r.randint(0, 99), r.randint(0, 999), r.choice(["Warszawa", "Kraków"])),
    "sv": lambda r: "%s %d, %03d %02d %s" % (r.choice(["Storgatan", "Drottninggatan", "Kungsvägen"]), r.randint(1, 99), r.randint(100, 999), r.randint(0, 99), r.choice(["Stockholm", "Göteborg"])),
    "ja": lambda r: "〒%03d-%04d 東京都%s%d丁目%d-%d" % (r.randint(100, 199), r.randint(0, 9999), r.choice(["港区六本木", "新宿区西新宿", "渋谷区神南"]), r.randint(1, 9), r.randint(1, 30), r.randint(1, 20)),
    "zh": lambda r: "%s%s路%d号" % (r.choice(["北京市朝阳区", "上海市浦东新区", "广东省深圳市"]), r.choice(["建国", "世纪", "深南"]), r.randint(1, 999)),
    "ko": lambda r: "서울특별시 %s %s %d" % (r.choice(["강남구", "마포구", "종로구"]), r.choice(["테헤란로", "월드컵로", "세종대로"]), r.randint(1, 500)),
}


def dob(r, lang):
    y, m, d = r.randint(1940, 2005), r.randint(1, 12), r.randint(1, 28)
    mon = {"en": ["January", "March", "June", "October"], "de": ["Januar", "März", "Juni", "Oktober"], "fr": ["janvier", "mars", "juin", "octobre"],
           "es": ["enero", "marzo", "junio", "octubre"], "it": ["gennaio", "marzo", "giugno", "ottobre"]}
    if lang in ("ja", "zh"):
        return "%d年%d月%d日" % (y, m, d)
    if lang == "ko":
        return "%d년 %d월 %d일" % (y, m, d)
    if lang in mon and r.random() < 0.5:
        return ("%d %s %d" % (d, r.choice(mon[lang]), y)) if lang != "es" else "%d de %s de %d" % (d, r.choice(mon[lang]), y)
    if lang == "en":
        return "%02d/%02d/%d" % (m, d, y)
    if lang in ("de", "ru", "pl"):
        return "%02d.%02d.%d" % (d, m, y)
    if lang == "sv":
        return "%d-%02d-%02d" % (y, m, d)
    return "%02d/%02d/%d" % (d, m, y)


# Templates: {slot} is replaced by a labelled value; text outside slots is unlabelled.
T = {
    "en": {"email": ["You can reach me at {email} if anything changes.", "Please send the signed contract to {email} by Friday."],
           "phone": ["My cell is {phone}, call after 6pm.", "Reach our driver at {phone} when you arrive."],
           "person": ["Hi, my name is {person} and I need help with my order.", "The patient, {person}, was admitted yesterday."],
           "address": ["Ship it to {address} please.", "Our new home address is {address}."],
           "url": ["The draft is here: {url}", "Check my profile {url} before the interview."],
           "date": ["I was born on {date}, so I qualify for the senior plan.", "Date of birth: {date}"],
           "account": ["My card number is {card}, expiry 09/27.", "Wire the deposit to IBAN {iban}.", "My SSN is {ssn} for the tax form."],
           "secret": ["Here is our production key: {secret}", "Why does this fail? client = Client(api_key=\"{secret}\")"],
           "password": ["The wifi password is {password} by the way."],
           "other": ["The laptop's MAC address is {mac}.", "My username: {user}"]},
    "de": {"email": ["Sie erreichen mich unter {email}.", "Bitte schicken Sie die Unterlagen an {email}."],
           "phone": ["Meine Handynummer ist {phone}.", "Rufen Sie mich unter {phone} an."],
           "person": ["Mein Name ist {person} und ich habe eine Frage zur Rechnung.", "Sehr geehrter Herr {last}, vielen Dank."],
           "address": ["Die Lieferadresse lautet {address}.", "Ich wohne in der {address}."],
           "url": ["Das Dokument liegt hier: {url}", "Mein Profil: {url}"],
           "date": ["Ich bin am {date} geboren.", "Geburtsdatum: {date}"],
           "account": ["Meine IBAN lautet {iban}.", "Kreditkarte: {card}"],
           "secret": ["Unser API-Schlüssel ist {secret}", "Passwort: {password}"],
           "other": ["Benutzername: {user}"]},
    "fr": {"email": ["Vous pouvez m'écrire à {email}.", "Envoyez le devis à {email} s'il vous plaît."],
           "phone": ["Mon numéro de portable est le {phone}.", "Appelez-moi au {phone}."],
           "person": ["Je m'appelle {person} et j'ai un problème avec ma commande.", "Bonjour {person}, merci pour votre message."],
           "address": ["J'habite au {address}.", "Adresse de livraison : {address}"],
           "url": ["Le document partagé : {url}"],
           "date": ["Je suis né le {date}.", "Date de naissance : {date}"],
           "account": ["Mon IBAN est {iban}.", "Numéro de carte : {card}"],
           "secret": ["Voici la clé : {secret}", "Mot de passe : {password}"],
           "other": ["Identifiant : {user}"]},
    "es": {"email": ["Mi correo es {email}.", "Escríbeme a {email} cuando puedas."],
           "phone": ["Mi teléfono es el {phone}.", "Llámame al {phone} mañana."],
           "person": ["Me llamo {person} y necesito ayuda.", "Hola {person}, gracias por escribir."],
           "address": ["Vivo en {address}.", "Dirección: {address}"],
           "url": ["Aquí está el documento: {url}"],
           "date": ["Nací el {date}.", "Fecha de nacimiento: {date}"],
           "account": ["Mi IBAN es {iban}.", "Mi DNI es {dni}."],
           "secret": ["La clave de la API es {secret}", "Contraseña: {password}"],
           "other": ["Usuario: {user}"]},
    "it": {"email": ["La mia email è {email}.", "Scrivimi a {email} per favore."],
           "phone": ["Il mio cellulare è {phone}.", "Chiamami al {phone}."],
           "person": ["Mi chiamo {person} e vorrei un'informazione.", "Gentile {person}, la ringraziamo."],
           "address": ["Abito in {address}.", "Indirizzo: {address}"],
           "url": ["Il documento è qui: {url}"],
           "date": ["Sono nato il {date}.", "Data di nascita: {date}"],
           "account": ["Il mio IBAN è {iban}.", "Carta di credito: {card}"],
           "secret": ["Ecco il token: {secret}", "Password: {password}"],
           "other": ["Username: {user}"]},
    "nl": {"email": ["Mijn e-mailadres is {email}.", "Stuur het naar {email} alstublieft."],
           "phone": ["Mijn telefoonnummer is {phone}.", "Bel me op {phone}."],
           "person": ["Mijn naam is {person} en ik heb een vraag.", "Beste {person}, bedankt voor uw bericht."],
           "address": ["Ik woon op {address}.", "Adres: {address}"],
           "url": ["Het gedeelde bestand: {url}"],
           "date": ["Ik ben geboren op {date}.", "Geboortedatum: {date}"],
           "account": ["Mijn rekeningnummer is {iban}.", "Creditcard: {card}"],
           "secret": ["De API-sleutel is {secret}", "Wachtwoord: {password}"],
           "other": ["Gebruikersnaam: {user}"]},
    "pt": {"email": ["Meu e-mail é {email}.", "Envie para {email}, por favor."],
           "phone": ["Meu celular é {phone}.", "Ligue para {phone}."],
           "person": ["Meu nome é {person} e preciso de ajuda.", "Olá {person}, obrigado pela mensagem."],
           "address": ["Moro na {address}.", "Endereço: {address}"],
           "url": ["O documento está aqui: {url}"],
           "date": ["Nasci em {date}.", "Data de nascimento: {date}"],
           "account": ["Meu CPF é {cpf}.", "Cartão: {card}"],
           "secret": ["A chave da API é {secret}", "Senha: {password}"],
           "other": ["Usuário: {user}"]},
    "ru": {"email": ["Моя почта {email}.", "Напишите мне на {email}."],
           "phone": ["Мой телефон {phone}.", "Звоните по номеру {phone}."],
           "person": ["Меня зовут {person}, у меня вопрос.", "Уважаемый {person}, спасибо за письмо."],
           "address": ["Я живу по адресу {address}.", "Адрес: {address}"],
           "url": ["Документ здесь: {url}"],
           "date": ["Я родился {date}.", "Дата рождения: {date}"],
           "account": ["Номер карты: {card}", "Мой IBAN {iban}."],
           "secret": ["Вот токен: {secret}", "Пароль: {password}"],
           "other": ["Логин: {user}"]},
    "pl": {"email": ["Mój e-mail to {email}.", "Proszę pisać na {email}."],
           "phone": ["Mój numer telefonu to {phone}.", "Proszę dzwonić pod {phone}."],
           "person": ["Nazywam się {person} i mam pytanie.", "Drogi {person}, dziękuję."],
           "address": ["Mieszkam przy {address}.", "Adres: {address}"],
           "url": ["Dokument jest tutaj: {url}"],
           "date": ["Urodziłem się {date}.", "Data urodzenia: {date}"],
           "account": ["Mój numer PESEL to {pesel}.", "Numer konta: {iban}"],
           "secret": ["Klucz API: {secret}", "Hasło: {password}"],
           "other": ["Login: {user}"]},
    "sv": {"email": ["Min e-post är {email}.", "Skicka det till {email}."],
           "phone": ["Mitt telefonnummer är {phone}.", "Ring mig på {phone}."],
           "person": ["Jag heter {person} och har en fråga.", "Hej {person}, tack för ditt meddelande."],
           "address": ["Jag bor på {address}.", "Adress: {address}"],
           "url": ["Dokumentet finns här: {url}"],
           "date": ["Jag är född {date}.", "Födelsedatum: {date}"],
           "account": ["Mitt personnummer är {pnr}.", "Kontonummer: {iban}"],
           "secret": ["API-nyckeln är {secret}", "Lösenord: {password}"],
           "other": ["Användarnamn: {user}"]},
    "ja": {"email": ["メールアドレスは{email}です。", "{email}までご連絡ください。"],
           "phone": ["電話番号は{phone}です。", "携帯：{phone}"],
           "person": ["私の名前は{person}です。", "担当の{person}さんに連絡してください。"],
           "address": ["住所は{address}です。", "住所：{address}"],
           "url": ["資料はこちら：{url}"],
           "date": ["生年月日は{date}です。", "{date}生まれです。"],
           "account": ["カード番号は{card}です。"],
           "secret": ["APIキーは {secret} です。", "パスワード：{password}"],
           "other": ["ユーザー名：{user}"]},
    "zh": {"email": ["我的邮箱是{email}。", "请发送到{email}。"],
           "phone": ["我的电话是{phone}。", "手机：{phone}"],
           "person": ["我叫{person}，想咨询一下。", "请联系{person}。"],
           "address": ["我住在{address}。", "地址：{address}"],
           "url": ["文档在这里：{url}"],
           "date": ["我的生日是{date}。", "出生日期：{date}"],
           "account": ["我的身份证号是{cnid}。", "银行卡号：{card}"],
           "secret": ["API密钥是 {secret}", "密码：{password}"],
           "other": ["用户名：{user}"]},
    "ko": {"email": ["제 이메일은 {email}입니다.", "{email}로 보내주세요."],
           "phone": ["제 전화번호는 {phone}입니다.", "휴대폰: {phone}"],
           "person": ["제 이름은 {person}입니다.", "{person} 님께 연락 바랍니다."],
           "address": ["주소는 {address}입니다.", "주소: {address}"],
           "url": ["문서는 여기 있습니다: {url}"],
           "date": ["생년월일은 {date}입니다.", "{date}에 태어났습니다."],
           "account": ["카드 번호는 {card}입니다."],
           "secret": ["API 키는 {secret} 입니다.", "비밀번호: {password}"],
           "other": ["아이디: {user}"]},
}

FILLER = {
    "en": ["Thanks for the quick reply.", "Let me know if you need anything else.", "The meeting went well overall.",
           "We are planning the release for next quarter.", "Could you double-check the numbers in the report?"],
    "de": ["Vielen Dank für die schnelle Antwort.", "Das Treffen war insgesamt gut.", "Können Sie die Zahlen noch einmal prüfen?"],
    "fr": ["Merci pour votre réponse rapide.", "La réunion s'est bien passée.", "Pouvez-vous vérifier les chiffres ?"],
    "es": ["Gracias por la respuesta rápida.", "La reunión salió bien.", "¿Puedes revisar los números del informe?"],
    "it": ["Grazie per la risposta veloce.", "La riunione è andata bene.", "Puoi ricontrollare i numeri?"],
    "nl": ["Bedankt voor het snelle antwoord.", "De vergadering ging goed.", "Kun je de cijfers nog eens controleren?"],
    "pt": ["Obrigado pela resposta rápida.", "A reunião correu bem.", "Pode verificar os números?"],
    "ru": ["Спасибо за быстрый ответ.", "Встреча прошла хорошо.", "Проверьте, пожалуйста, цифры в отчёте."],
    "pl": ["Dziękuję za szybką odpowiedź.", "Spotkanie poszło dobrze.", "Czy możesz sprawdzić liczby?"],
    "sv": ["Tack för det snabba svaret.", "Mötet gick bra.", "Kan du dubbelkolla siffrorna?"],
    "ja": ["早速のご返信ありがとうございます。", "会議は順調でした。", "数字をもう一度確認していただけますか。"],
    "zh": ["感谢您的快速回复。", "会议进行得很顺利。", "请再核对一下报告中的数字。"],
    "ko": ["빠른 답변 감사합니다.", "회의는 잘 진행되었습니다.", "보고서의 숫자를 다시 확인해 주세요."],
}

# Hard negatives: PII-shaped but not personal (language-neutral plus a few localised ones).
HARD = [
    "Upgrade to version {ver} before Monday; {ver2} had a regression.",
    "The commit {sha} fixed the build, see also {sha7}.",
    "Request {uuid} finished at {ts} in {ms} ms.",
    "The total is ${price} (tax {pct}% included), order #{order}.",
    "Docs: https://docs.python.org/3/library/{mod}.html and https://en.wikipedia.org/wiki/{wiki}",
    "Set OPENAI_API_KEY=your_api_key_here in .env and never commit it.",
    "Example: contact user@example.com or call 555-0100 (fictional).",
    "api_key = \"sk-xxxxxxxxxxxxxxxxxxxxxxxx\"  # placeholder",
    "The release date was {isodate}; the next one is {isodate2}.",
    "Tracking number {track} shipped via UPS.",
    "Server listens on 0.0.0.0:{port}; health check at http://localhost:{port}/health.",
    "Population grew from {big1} to {big2} between 2010 and 2020.",
    "Use pip install numpy=={ver} and torch>={ver2}.",
    "The function returns 3.14159 for pi and 2.71828 for e.",
    "Room {room} on floor 3, meeting at 14:30 on {isodate}.",
    "See RFC 7519 for JWTs and RFC 5322 for e-mail syntax.",
    "The file logo@2x.png is 1200x630 pixels, 24-bit colour.",
    "Checksum sha256: {sha256}",
    "git clone https://github.com/torvalds/linux.git && cd linux",
    "Invoice INV-{order} for {price} EUR is due on {isodate}.",
    "Latency p50 {ms} ms, p99 {ms2} ms over {big1} requests.",
    "Mount the volume at /var/lib/postgresql/data and restart.",
    "Coordinates 48.8584, 2.2945 point to the Eiffel Tower.",
    "Call the function with password=None to use the default.",
    "ISBN 978-3-16-148410-0 is on the back cover.",
    "Flight LH{flight} departs at 07:45 from gate B{gate}.",
]
HARD_LOCAL = {
    "de": ["Die Version {ver} erschien am {isodate}; sie kostet {price} €.", "Bestellnummer {order} wurde versandt."],
    "fr": ["La version {ver} est sortie le {isodate} ; prix : {price} €.", "Commande n° {order} expédiée."],
    "es": ["La versión {ver} salió el {isodate}; cuesta {price} €.", "Pedido {order} enviado."],
    "ja": ["バージョン{ver}は{isodate}にリリースされました。", "注文番号{order}は発送済みです。"],
    "zh": ["版本{ver}于{isodate}发布。", "订单号{order}已发货。"],
    "ko": ["버전 {ver}은 {isodate}에 출시되었습니다.", "주문 번호 {order}가 발송되었습니다."],
}


class Doc:
    def __init__(self):
        self.parts = []
        self.spans = []
        self.len = 0

    def add(self, s, label=None):
        if label:
            self.spans.append({"start": self.len, "end": self.len + len(s), "label": label})
        self.parts.append(s)
        self.len += len(s)

    def text(self):
        return "".join(self.parts)


def hard_value(r, key):
    hx = "0123456789abcdef"
    return {
        "ver": lambda: "%d.%d.%d" % (r.randint(0, 9), r.randint(0, 30), r.randint(0, 99)),
        "ver2": lambda: "%d.%d" % (r.randint(0, 9), r.randint(0, 30)),
        "sha": lambda: rand_tok(r, 40, hx), "sha7": lambda: rand_tok(r, 7, hx), "sha256": lambda: rand_tok(r, 64, hx),
        "uuid": lambda: "-".join(rand_tok(r, k, hx) for k in (8, 4, 4, 4, 12)),
        "ts": lambda: "2025-%02d-%02dT%02d:%02d:%02dZ" % (r.randint(1, 12), r.randint(1, 28), r.randint(0, 23), r.randint(0, 59), r.randint(0, 59)),
        "ms": lambda: str(r.randint(1, 999)), "ms2": lambda: str(r.randint(1000, 9999)),
        "price": lambda: "%d.%02d" % (r.randint(1, 99999), r.randint(0, 99)), "pct": lambda: str(r.randint(1, 25)),
        "order": lambda: str(r.randint(10 ** 5, 10 ** 9)), "mod": lambda: r.choice(["json", "re", "asyncio", "pathlib"]),
        "wiki": lambda: r.choice(["Alan_Turing", "Luhn_algorithm", "Berlin", "Rust_(programming_language)"]),
        "isodate": lambda: "2024-%02d-%02d" % (r.randint(1, 12), r.randint(1, 28)),
        "isodate2": lambda: "%02d.%02d.2025" % (r.randint(1, 28), r.randint(1, 12)),
        "track": lambda: "1Z" + rand_tok(r, 16, string.ascii_uppercase + string.digits),
        "port": lambda: str(r.randint(1024, 65535)), "big1": lambda: "{:,}".format(r.randint(10 ** 6, 10 ** 8)),
        "big2": lambda: "{:,}".format(r.randint(10 ** 6, 10 ** 8)), "room": lambda: str(r.randint(100, 999)),
        "flight": lambda: str(r.randint(100, 9999)), "gate": lambda: str(r.randint(1, 60)),
    }[key]()


def fill_plain(r, tpl):
    out, i = [], 0
    while i < len(tpl):
        j = tpl.find("{", i)
        if j < 0:
            out.append(tpl[i:])
            break
        k = tpl.index("}", j)
        out.append(tpl[i:j])
        out.append(hard_value(r, tpl[j + 1:k]))
        i = k + 1
    return "".join(out)


class Persona:
    def __init__(self, r, lang):
        self.lang = lang
        self.first, self.last = r.choice(FIRST[lang]), r.choice(LAST[lang])
        if lang in ("ja", "zh", "ko"):
            self.person = self.last + self.first
            lf, ll = r.choice(TRANSLIT[lang]), r.choice(["tanaka", "wang", "kim", "li", "sato", "park"])
        elif lang == "ru":
            self.person = self.first + " " + self.last
            lf, ll = r.choice(TRANSLIT["ru"]), r.choice(["ivanov", "smirnova", "kuznetsov"])
        else:
            self.person = self.first + " " + self.last
            tr = str.maketrans("äöüéèçñíóúàãåłśąęźżćńßÉ", "aoueecniouaaalsaezzcnsE")
            lf, ll = self.first.lower().translate(tr), self.last.lower().translate(tr)
        dom = r.choice(MAILDOM[lang] + COMPANY[:2])
        self.email = r.choice(["%s.%s@%s" % (lf, ll, dom), "%s%s%d@%s" % (lf[0], ll, r.randint(1, 99), dom), "%s_%s@%s" % (lf, ll, dom)])
        self.phone = phone(r, lang)
        self.address = ADDR[lang](r)
        self.url = private_url(r, lf, ll)
        self.date = dob(r, lang)
        self.card = card(r)
        self.iban = iban(r, {"de": "DE", "fr": "FR", "es": "ES", "it": "IT", "nl": "NL", "pt": "PT", "pl": "PL", "sv": "SE", "en": "GB", "ru": "DE"}.get(lang, "DE"))
        self.ssn, self.dni, self.cpf, self.pesel, self.pnr, self.cnid = ssn(r), dni(r), cpf(r), pesel(r), se_pnr(r), cn_rid(r)
        self.secret = secret(r)
        self.password = password(r)
        self.mac = ":".join(rand_tok(r, 2, "0123456789abcdef") for _ in range(6))
        self.user = lf + "_" + ll[:3] + str(r.randint(1, 99))


SLOT_LABEL = {"email": "private_email", "phone": "private_phone", "person": "private_person", "last": "private_person",
              "address": "private_address", "url": "private_url", "date": "private_date", "card": "account_number",
              "iban": "account_number", "ssn": "account_number", "dni": "account_number", "cpf": "account_number",
              "pesel": "account_number", "pnr": "account_number", "cnid": "account_number", "secret": "secret",
              "password": "secret", "mac": "other_pii", "user": "other_pii"}


def fill(doc, tpl, p):
    i = 0
    while i < len(tpl):
        j = tpl.find("{", i)
        if j < 0:
            doc.add(tpl[i:])
            return
        k = tpl.index("}", j)
        doc.add(tpl[i:j])
        slot = tpl[j + 1:k]
        doc.add(getattr(p, slot), SLOT_LABEL[slot])
        i = k + 1


def sep(lang):
    return "" if lang in ("ja", "zh") else " "


def pii_doc(r, lang):
    p = Persona(r, lang)
    d = Doc()
    keys = list(T[lang].keys())
    n = r.randint(1, 4)
    chosen = r.sample(keys, n)
    items = [("pii", k) for k in chosen] + [("fill", None) for _ in range(r.randint(0, 2))]
    r.shuffle(items)
    for idx, (kind, k) in enumerate(items):
        if idx:
            d.add("\n" if r.random() < 0.3 else sep(lang))
        if kind == "pii":
            fill(d, r.choice(T[lang][k]), p)
        else:
            d.add(r.choice(FILLER[lang]))
    return d


def clean_doc(r, lang):
    d = Doc()
    n = r.randint(2, 5)
    pool = HARD + HARD_LOCAL.get(lang, [])
    for idx in range(n):
        if idx:
            d.add(sep(lang) if r.random() < 0.7 else "\n")
        if r.random() < 0.35:
            d.add(r.choice(FILLER[lang]))
        else:
            d.add(fill_plain(r, r.choice(pool)))
    return d


def long_doc(r, lang):
    p = Persona(r, lang)
    d = Doc()
    keys = list(T[lang].keys())
    recurring = r.sample(keys, 3)
    while d.len < 10000:
        if d.len:
            d.add("\n\n")
        for _ in range(r.randint(3, 6)):
            x = r.random()
            if x < 0.25:
                fill(d, r.choice(T[lang][r.choice(recurring)]), p)
            elif x < 0.55:
                d.add(fill_plain(r, r.choice(HARD + HARD_LOCAL.get(lang, []))))
            else:
                d.add(r.choice(FILLER[lang]))
            d.add(sep(lang))
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument("--scale", type=int, default=1)
    a = ap.parse_args()
    r = random.Random(a.seed)
    out = []
    for lang in LANGS:
        for i in range(40 * a.scale):
            out.append(("pii", lang, i, pii_doc(r, lang)))
        for i in range(30 * a.scale):
            out.append(("clean", lang, i, clean_doc(r, lang)))
        for i in range(2 * a.scale):
            out.append(("long", lang, i, long_doc(r, lang)))
    import sys
    for kind, lang, i, d in out:
        t = d.text()
        for s in d.spans:
            assert t[s["start"]:s["end"]].strip() == t[s["start"]:s["end"]]
        rec = {"id": "%s-%s-%03d" % (kind, lang, i), "lang": lang, "kind": kind, "text": t, "spans": d.spans}
        sys.stdout.write(json.dumps(rec, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
