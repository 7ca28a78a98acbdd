"""The service answers the two calls end to end."""


def test_added_message_is_found_by_its_word(client):
    assert client.add("alice", "r1", ["The launch moved to August 14"]).status == 200
    assert client.contents("alice", "When is the launch?") == ["The launch moved to August 14"]
