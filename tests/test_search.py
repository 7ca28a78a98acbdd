"""Search: the user's own original messages, ranked by the user's own BM25, in any script."""

from __future__ import annotations

import pytest

# (script, message, a word of it as a query)
SCRIPTS = [
    ("latin-diacritics", "Wir treffen uns in Zürich am Bahnhof", "zurich"),
    ("latin-diacritics-query", "We met at the cafe near the station", "café"),
    ("cyrillic", "Я переехал в Новосибирск прошлой весной", "Новосибирск"),
    ("greek", "Μένω στην Αθήνα με την οικογένειά μου", "αθηνα"),
    ("arabic", "أعيش في القاهرة منذ سنوات", "القاهرة"),
    ("hebrew", "אני גר בירושלים עם המשפחה", "בירושלים"),
    ("devanagari", "मैं दिल्ली में रहता हूँ और हिन्दी बोलता हूँ", "हिन्दी"),
    ("thai", "ฉันชอบกินข้าวผัดที่กรุงเทพ", "กรุงเทพ"),
    ("chinese-two-char-word", "我去年搬到了北京工作", "北京"),
    ("chinese-question", "我最喜欢吃饺子", "你喜欢吃什么饺子？"),
    ("japanese-kanji", "来月東京に引っ越します", "東京"),
    ("japanese-kana", "わたしはラーメンがだいすきです", "ラーメン"),
    ("korean-particle", "저는 서울에 살고 있어요", "서울"),
    ("emoji", "Celebrated the launch 🚀 with the team", "🚀"),
]


@pytest.mark.parametrize("script,message,query", SCRIPTS, ids=[s[0] for s in SCRIPTS])
def test_each_script_is_found_by_a_word_of_it(client, script, message, query):
    client.add("alice", "r-noise", ["An unrelated note about gardening tools",
                                    "Another unrelated note about bicycles"])
    assert client.add("alice", f"r-{script}", [message]).status == 200
    assert client.contents("alice", query)[:1] == [message]
    assert client.contents("bob", query) == []


def test_another_users_words_are_never_returned(client):
    client.add("alice", "r1", ["Alice keeps a secret flamingo named Pinky"])
    client.add("bob", "r1", ["Bob keeps a tortoise"])
    assert client.contents("bob", "flamingo Pinky") == []
    assert client.contents("alice", "flamingo Pinky") == ["Alice keeps a secret flamingo named Pinky"]


def test_unknown_user_gets_empty_data_and_no_file_is_created(app, client):
    response = client.search("nobody", "anything at all")
    assert response.status == 200 and response.body == {"data": []}
    assert app.store.shard_paths() == []


def test_query_without_searchable_terms_answers_empty(client):
    client.add("alice", "r1", ["Some stored message"])
    assert client.search("alice", "?!? ... ---").body == {"data": []}


FTS_HAZARDS = ['"', '""', '"unbalanced', "what's", "c++", "1.5", "AND", "OR", "NOT x", "x NOT",
               "NEAR(a b)", "NEAR(a b, 2)", "x*", "*", "^x", "-x", "e-mail", "x:", "user_id:alice",
               "words:secret", "grams:secret", "{words grams}: secret", "x) OR user_id : \"bob\" OR (y",
               "(", ")", "((((", "a + b", "col:val AND NOT", "\\", "'", "`", "%", "_", "\x00", ";--",
               "secret OR", "OR secret", "' OR 1=1 --"]


@pytest.mark.parametrize("query", FTS_HAZARDS)
def test_fts_syntax_in_a_query_is_searched_as_words_and_never_widens_scope(client, query):
    client.add("alice", "r1", ["alice secret words about e mail and c"])
    client.add("bob", "r1", ["bob secret words about user_id alice x y"])
    response = client.search("alice", query)
    assert response.status == 200, response.body
    assert all(item["content"].startswith("alice") for item in response.body["data"])
    # control: the same hazard wrapped around a real word still finds alice's row
    assert client.contents("alice", f"{query} secret")[:1] == ["alice secret words about e mail and c"]


def test_results_are_ranked_best_first_with_scores_non_increasing(client):
    client.add("alice", "r1", ["the red kite flew", "red kite red kite red kite", "a blue heron",
                               "kites are red", "nothing relevant here"])
    data = client.search("alice", "red kite").body["data"]
    scores = [item["score"] for item in data]
    assert scores == sorted(scores, reverse=True)
    assert data[0]["content"] == "red kite red kite red kite"
    assert "a blue heron" not in [item["content"] for item in data]


def test_top_k_bounds_the_result_count(client):
    client.add("alice", "r1", [f"pelican note number {i}" for i in range(20)])
    assert len(client.contents("alice", "pelican", top_k=7)) == 7
    returned = "\n".join(client.contents("alice", "pelican", top_k=100)).split("\n")
    assert sorted(returned) == sorted(f"pelican note number {i}" for i in range(20))


def test_identical_contents_are_returned_once(client):
    client.add("alice", "r1", ["duplicate llama line"] * 3, session="s1")
    client.add("alice", "r2", ["duplicate llama line", "another llama line"], session="s2")
    assert client.contents("alice", "llama", top_k=10) == ["duplicate llama line", "another llama line"]


def test_many_duplicates_still_fill_top_k(client):
    client.add("alice", "r1", ["same yak text"] * 40 + [f"yak variant {i}" for i in range(5)])
    assert len(client.contents("alice", "yak", top_k=5)) == 5


def test_same_store_and_query_give_the_same_ranking(client):
    client.add("alice", "r1", ["equal tie word", "equal tie word.", "tie word equal", "other"])
    first = client.search("alice", "tie word").body["data"]
    assert len(first) >= 2
    assert [client.search("alice", "tie word").body["data"] for _ in range(3)] == [first] * 3


def test_session_id_is_not_a_filter_unless_asked(client):
    client.add("alice", "r1", ["walnut in session one"], session="one")
    client.add("alice", "r2", ["walnut in session two"], session="two")
    plain = client.search("alice", "walnut", session_id="one").body["data"]
    assert len(plain) == 2
    filtered = client.search("alice", "walnut", session_id="one", filter_session=True).body["data"]
    assert [item["content"] for item in filtered] == ["walnut in session one"]


def test_result_carries_provenance_and_source_time(client):
    client.add("alice", "r1", ["provenance pigeon"], start_ms=1_785_945_600_000)
    item = client.search("alice", "pigeon").body["data"][0]
    assert item["created_at"] == "2026-08-05T16:00:00Z"
    assert item["view"] == "message" and item["source_message_ids"] == [item["id"]]
    assert "lexical" in item["evidence_flags"] and item["role"] == "user"
    assert item["session_id"] == "s1"


def test_provenance_can_be_switched_off(make_app):
    from conftest import Client

    c = Client(make_app(provenance=False).port)
    c.add("alice", "r1", ["bare contract badger"])
    item = c.search("alice", "badger").body["data"][0]
    assert set(item) == {"id", "content", "score", "created_at", "role", "session_id"}


def test_options_add_terms_below_the_questions_own_evidence(client):
    client.add("alice", "r1", ["My favourite colour is teal"], session="s1")
    client.add("alice", "r2", ["Purple purple purple purple"], session="s2")
    plain = [i["content"] for i in client.search("alice", "favourite colour").body["data"]]
    assert plain == ["My favourite colour is teal"]  # control: the distractor has no question word
    data = client.search("alice", "favourite colour", options=["purple", "teal"]).body["data"]
    contents = [item["content"] for item in data]
    assert contents[0] == "My favourite colour is teal"
    assert contents.index("Purple purple purple purple") > 0


def test_other_users_corpus_does_not_change_a_users_scores(app, client):
    """BM25 statistics are the user's own: a large, skewed corpus written for other users leaves
    this user's ids, order and scores exactly as they were."""
    client.add("alice", "r1", ["Zanzibar trip planning with Omar", "Omar booked the ferry",
                               "ferry tickets cost 40 dollars", "the weather in Zanzibar is hot",
                               "Omar likes spicy food"])
    queries = ["Omar ferry", "Zanzibar weather", "tickets dollars", "spicy Omar Zanzibar"]
    before = {q: client.search("alice", q).body["data"] for q in queries}
    for u in range(20):
        client.add(f"other-{u}", "r1", ["Omar Omar Omar ferry"] * 10 + ["Zanzibar"] * 10)
    after = {q: client.search("alice", q).body["data"] for q in queries}
    assert after == before
    assert all(before[q] for q in queries)  # control: every query has results to compare
