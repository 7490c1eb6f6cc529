"""The words the catalog's full-text search indexes and looks for."""

from __future__ import annotations

from server.catalog.text import MAX_TERMS, host_words, query_terms, searchable, words


def test_words_are_lower_case_ascii_letters_and_digits() -> None:
    assert words("Café-Crème: x402 API v2.1!") == ["cafe", "creme", "x402", "api", "v2", "1"]
    assert words("ｗｅｂ　ｓｅａｒｃｈ") == ["web", "search"]  # full-width letters fold too
    assert words("") == []


def test_a_search_column_holds_each_word_once_in_order() -> None:
    assert searchable("Web Search", "search the WEB", "market-data") == "web search the market data"
    assert host_words("api.search.example.com") == "api search example com"


def test_a_query_drops_filler_and_plurals_and_keeps_at_most_eight_terms() -> None:
    assert query_terms("find me a web search API I can pay") == ["web", "search"]
    assert query_terms("crypto prices") == ["crypto", "price"]
    assert query_terms("address glass news") == ["address", "glass", "new"]
    assert query_terms("x y z") == []
    assert query_terms("API for the APIs") == []
    many = " ".join(f"topic{n}" for n in range(20))
    assert len(query_terms(many)) == MAX_TERMS


def test_query_terms_are_safe_inside_either_databases_query_syntax() -> None:
    # Quotes, operators and column filters never survive: terms are letters and digits only.
    hostile = "web\" OR search_title:* NEAR(a b) -x & !y | z:*A ' ; DROP TABLE catalog_entries"
    for term in query_terms(hostile):
        assert term.isalnum()
        assert term.isascii()
        assert term == term.lower()
