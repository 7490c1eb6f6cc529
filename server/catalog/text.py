"""Words for full-text search, the same on SQLite and PostgreSQL.

Both databases index only text this module wrote: lower-case ASCII words of letters and digits,
separated by single spaces. Given that, SQLite's `unicode61` tokenizer and PostgreSQL's `simple`
configuration split it into exactly the same tokens, so a term matches the same entries on both.
Accents are folded (`café` is `cafe`); anything else that is not a letter or a digit separates
words (`market-data` is `market data`, `api.example.com` is `api example com`).

A query becomes at most `MAX_TERMS` terms: its words without filler (`find me an API for ...`)
and without a plural `s`, each matched as a prefix, so `prices` finds `price` and `pricing`.
"""

from __future__ import annotations

import re
import unicodedata

MAX_TERMS = 8
MIN_TERM_LENGTH = 2

_WORD = re.compile(r"[a-z0-9]+")

# Words that say nothing about what an API does; most also appear in nearly every entry's name.
STOPWORDS = frozenset(
    {
        "a",
        "an",
        "and",
        "any",
        "api",
        "apis",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "endpoint",
        "endpoints",
        "find",
        "for",
        "from",
        "get",
        "give",
        "i",
        "in",
        "is",
        "it",
        "me",
        "my",
        "need",
        "of",
        "on",
        "or",
        "pay",
        "paid",
        "paying",
        "please",
        "service",
        "services",
        "some",
        "that",
        "the",
        "this",
        "to",
        "use",
        "want",
        "which",
        "with",
        "x402",
        "you",
        "your",
    }
)


def words(text: str) -> list[str]:
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()
    return _WORD.findall(folded)


def searchable(*texts: str) -> str:
    """The words of `texts`, in order, each once: what a search column holds."""
    seen: dict[str, None] = {}
    for text in texts:
        for word in words(text):
            seen.setdefault(word)
    return " ".join(seen)


def host_words(host: str) -> str:
    return " ".join(words(host.replace(".", " ")))


def _stem(word: str) -> str:
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def query_terms(query: str) -> list[str]:
    """The terms a query searches for, in order, each once, at most MAX_TERMS."""
    terms: list[str] = []
    for word in words(query):
        if word in STOPWORDS or len(word) < MIN_TERM_LENGTH:
            continue
        term = _stem(word)
        if term not in terms:
            terms.append(term)
    return terms[:MAX_TERMS]
