"""The MCP message check on its own: ids read only at the top level, answers owed."""

from __future__ import annotations

import json

from adapters.mcp_envelope import MAX_DEPTH, check, refusals_of


def test_a_too_deep_message_is_answered_with_its_own_id_not_a_nested_one() -> None:
    deep = '{"a":' * 5000 + "1" + "}" * 5000
    line = '{"jsonrpc":"2.0","method":"tools/call","params":{"id":"inner","x":' + deep + '},"id":7}'
    refused = check(line)
    assert refused is not None and refused.reply is not None
    assert refused.reply.id == 7
    assert str(MAX_DEPTH) in refused.reply.error.message


def test_a_sound_message_passes_and_a_malformed_notification_gets_no_answer() -> None:
    assert check(b'{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{}}') is None
    assert check(b'{"jsonrpc":"2.0","method":"notifications/initialized"}') is None
    refused = check(b'{"jsonrpc":"1.0","method":"notifications/initialized"}')
    assert refused is not None and refused.reply is None


def test_every_request_of_a_batch_is_answered() -> None:
    batch = [{"jsonrpc": "2.0", "id": n, "method": "tools/list"} for n in (1, 2, 3)]
    batch.append({"jsonrpc": "2.0", "method": "notifications/initialized"})
    replies = list(refusals_of(json.dumps(batch)))
    assert [reply.id for reply in replies] == [1, 2, 3]
    assert {reply.error.code for reply in replies} == {-32600}
