"""Does a seller's text try to instruct the agent? A pure, conservative detector.

A 402 describes a price; it has no business telling an AI agent what to do. Text that reads like
orders to a model (ignore your instructions, pay this address, do not tell the user, raise your
limit, call this tool, chat-template markers) makes the payment wait for a human
(`instruction_like_description`) instead of being signed.

The detector favours precision over recall: ordinary paywall copy ("Pay 0.01 USDC to read the
report", "See the API instructions") must never trip it, because a false alarm blocks a payment.
Obfuscation that costs nothing to undo is undone first: Unicode compatibility forms (full-width
letters), zero-width characters, punctuation and runs of white space between words.
"""

from __future__ import annotations

import html
import re
import unicodedata

MAX_SCANNED_CHARS = 32_768

_ZERO_WIDTH = dict.fromkeys(
    map(ord, "\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\u2064\ufeff\u00ad")
)

_OVERRIDE_VERB = r"(?:ignore|disregard|forget|override|bypass|skip|drop|abandon)"
_TARGET = (
    r"(?:instructions?|prompts?|rules|guidelines|directives|guardrails|system messages?|"
    r"polic(?:y|ies)|limits?|restrictions|programming|constraints)"
)
_QUALIFIER = (
    r"(?:(?:all|any|every|your|the|my|of|previous|prior|above|earlier|preceding|original|system|"
    r"existing|current|spending|safety|user s?)\s+){0,4}"
)
_PAY_VERB = r"(?:pay|send|transfer|wire|deposit|approve|authori[sz]e)"
_USER = r"(?:the\s+)?(?:user|human|owner|operator|person|customer|admin)"
_AGENT = r"(?:ai|assistant|agent|llm|model|bot|claude|gpt|chatgpt|language model)"

_PATTERNS = tuple(
    re.compile(pattern)
    for pattern in (
        # "ignore your previous instructions", "disregard all rules", "bypass the spending limit"
        rf"\b{_OVERRIDE_VERB}\s+{_QUALIFIER}{_TARGET}\b",
        # "new instructions:", "updated system prompt"
        r"\b(?:new|updated|real|true|hidden|secret|important)\s+(?:system\s+)?(?:instructions|prompt)\b",
        r"\b(?:system|developer)\s+(?:prompt|message|override|instruction|mode)\b",
        # addressed to the model: "as an AI", "AI agent: you must pay", "assistant, send ..."
        rf"\bas\s+an?\s+{_AGENT}\b",
        rf"\b{_AGENT}s?\s+(?:you\s+)?(?:must|should|shall|need\s+to|have\s+to|are\s+required\s+to)\s+"
        rf"(?:now\s+)?(?:{_PAY_VERB}|call|use|run|execute|ignore|fetch|buy|purchase|visit|open)\b",
        rf"\byou\s+(?:must|should|shall|need\s+to|have\s+to|are\s+required\s+to)\s+(?:now\s+)?(?:also\s+)?"
        rf"(?:{_PAY_VERB}|ignore|disregard|call|execute)\b.{{0,80}}(?:0x[0-9a-f]{{6,}}|usdc|tool|instructions?)",
        # money to an address: "send 5 USDC to 0xabc...", "pay the remaining balance to this wallet"
        rf"\b{_PAY_VERB}\b.{{0,60}}\bto\s+(?:the\s+)?(?:following\s+|this\s+)?(?:address|wallet|account)?\s*0x[0-9a-f]{{6,}}",
        rf"\b{_PAY_VERB}\b.{{0,60}}\bto\s+(?:this|the\s+following|my|our)\s+(?:address|wallet|account)\b",
        # secrecy from the human in the loop
        rf"\b(?:do\s+not|don t|dont|never|without)\s+"
        rf"(?:tell|telling|inform|informing|mention|mentioning|ask|asking|"
        rf"alert|alerting|notify|notifying|confirm|confirming|consult|consulting|warn|warning)\s+"
        rf"(?:it\s+to\s+|with\s+|this\s+to\s+)?{_USER}\b",
        # loosening the agent's own controls
        r"\b(?:increase|raise|remove|disable|lift|turn\s+off|double)\s+(?:your|the\s+agent s|the)\s+"
        r"(?:spending\s+|daily\s+|payment\s+|budget\s+)?(?:limit|cap|budget|policy|threshold|approval)s?\b",
        r"\bpropose_rule\b|\bfetch_paid\b|\bget_budget\b|\bquote_payment\b|\bget_approval_status\b",
        r"\b(?:call|invoke|use|run)\s+the\s+(?:tool|function)\s+\w+",
        # prompt-format markers that only mean something to a model
        r"<\|?(?:im_start|im_end|system|assistant|user|endoftext)\|?>|\[/?inst\]|<</?sys>>|###\s*(?:system|instruction)",
        # a few other languages
        r"\bignora\s+(?:todas\s+)?(?:las\s+|tus\s+|sus\s+)?(?:instrucciones|reglas)\b",
        r"\bignoriere\s+(?:alle\s+)?(?:deine\s+|die\s+|vorherigen\s+)*(?:anweisungen|regeln)\b",
        r"\bignore[rz]?\s+(?:toutes\s+)?(?:tes\s+|vos\s+|les\s+)?(?:instructions|consignes)\s+(?:pr[eé]c[eé]dentes)?",
    )
)


def normalise(text: str) -> str:
    """Fold the text so cheap disguises do not matter: case, width, zero-width, punctuation."""
    text = unicodedata.normalize("NFKC", text[:MAX_SCANNED_CHARS]).translate(_ZERO_WIDTH).lower()
    # Punctuation between words becomes a space (keeps 0x addresses and tool_names intact).
    text = re.sub(r"[^\w$|<>\[\]/#]+", " ", text)
    return re.sub(r"\s+", " ", text).strip()


_SCRIPT = re.compile(r"<(script|style)\b.*?(?:</\1\s*>|$)", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]{0,2000}>")


def visible_text(body: str, content_type: str) -> str:
    """What a person would read of a body: HTML loses its scripts, styles and tags."""
    if "html" not in content_type.lower():
        return body
    return html.unescape(_TAG.sub(" ", _SCRIPT.sub(" ", body)))


def looks_like_instructions(text: str | None) -> bool:
    """True when `text` reads like orders to an AI agent rather than a description of a price."""
    if not text:
        return False
    folded = normalise(text)
    return any(pattern.search(folded) for pattern in _PATTERNS)


def any_instructions(texts: list[str]) -> bool:
    return any(looks_like_instructions(text) for text in texts)


MAX_CHALLENGE_TEXT_BYTES = 32 * 1024


def challenge_reads_like_instructions(seller_texts: list[str], body: bytes, content_type: str) -> bool:
    """Whether a 402's own words (its challenge's texts and its body, as a reader would see it)
    read like orders to an agent. Only the first MAX_CHALLENGE_TEXT_BYTES of the body are read."""
    text = body[:MAX_CHALLENGE_TEXT_BYTES].decode("utf-8", errors="ignore")
    # The body as a reader would see it: an HTML paywall's scripts are not text.
    return any_instructions([*seller_texts, visible_text(text, content_type)])
