"""The rollout digest on hand-made responses: final text vs reasoning, finish, prompt, verifier fields."""

from __future__ import annotations

import pytest

from ngrp_lib.artifacts.response import final_and_reasoning, finish, response_text, split_think
from ngrp_lib.inspect.digest import cut_middle, digest, last_user_message, verifier_fields


def message(text, **extra):
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
        **extra,
    }


def test_final_text_is_the_last_message_and_response_text_joins_them():
    response = {
        "output": [
            message("first "),
            {"type": "function_call", "name": "calc", "arguments": "{}"},
            {"type": "function_call_output", "output": "4"},
            message("so 4"),
        ]
    }
    assert final_and_reasoning(response) == ("so 4", "")
    assert response_text(response) == "first so 4"


def test_reasoning_items_summaries_and_content():
    response = {
        "output": [
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "plan"}]},
            {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "detail"}]},
            message("answer"),
        ]
    }
    assert final_and_reasoning(response) == ("answer", "plan\n\ndetail")


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("<think>a\nb</think>\n\nThe answer is 4", ("a\nb", "The answer is 4")),
        ("only closed here</think>4", ("only closed here", "4")),  # the chat template opened the block
        ("no block at all", ("", "no block at all")),
        ("<think>x</think>one</think>two", ("x</think>one", "two")),
    ],
)
def test_inline_think_blocks(text, want):
    assert split_think(text) == want


def test_inline_think_goes_to_reasoning_but_not_out_of_response_text():
    response = {"output": [message("<think>hmm</think>42")]}
    assert final_and_reasoning(response) == ("42", "hmm")
    assert response_text(response) == "<think>hmm</think>42", "the verifier's view is the raw text"


@pytest.mark.parametrize(
    ("response", "status", "reason"),
    [
        ({"status": "completed"}, "completed", None),
        (
            {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}},
            "incomplete",
            "max_output_tokens",
        ),
        (
            {"status": "completed", "incomplete_details": {"reason": "content_filter"}},
            "incomplete",
            "content_filter",
        ),
        ({"status": "failed", "error": {"message": "boom"}}, "failed", "boom"),
        ({}, "unknown", None),
        (None, "unknown", "the row has no response object"),
    ],
)
def test_finish_status(response, status, reason):
    done = finish(response)
    assert (done.status, done.reason) == (status, reason)
    assert done.truncated == (status == "incomplete")


def test_last_user_message_shapes():
    assert last_user_message({"input": "plain"}) == "plain"
    params = {
        "input": [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "reply"},
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "second "},
                    {"type": "input_text", "text": "part"},
                ],
            },
            {"type": "function_call_output", "output": "tool"},
        ]
    }
    assert last_user_message(params) == "second part"
    assert last_user_message(None) == "" and last_user_message({"input": 3}) == ""


def test_verifier_fields_are_what_the_input_row_does_not_have():
    row = {
        "response": {},
        "reward": 1.0,
        "level": "hard",
        "expected_answer": "4",
        "extracted_answer": "4",
        "is_correct": True,
        "judge": {"score": 9},
        "_ng_task_index": 0,
        "_ngrp_elapsed_s": 1.0,
    }
    assert verifier_fields(row, {"level": "hard", "expected_answer": "4"}, "expected_answer") == {
        "is_correct": True,
        "judge": '{"score":9}',
    }
    assert verifier_fields(row, None, "expected_answer") == {
        "level": "hard",
        "is_correct": True,
        "judge": '{"score":9}',
    }


def test_digest_passes_masks_and_reads_expected_from_the_input_row():
    row = {
        "_ng_task_index": 3,
        "_ng_rollout_index": 1,
        "reward": True,
        "response": {"output": [message("x")]},
        "expected_answer": "stale",
    }
    d = digest(row, {"expected_answer": "fresh", "responses_create_params": {"input": "q"}}, threshold=1.0)
    assert (d.rollout_id, d.reward, d.passed, d.expected_answer, d.prompt) == ("3-1", 1.0, True, "fresh", "q")
    assert digest({**row, "mask_sample": True}).passed is None
    assert digest({**row, "reward": None}).passed is None
    assert digest({**row, "reward": 0.5}, threshold=0.5).passed is True


def test_cut_middle_keeps_the_end_and_marks_the_cut():
    text = "a" * 100 + "END"
    cut = cut_middle(text, 30)
    assert cut.endswith("END") and cut.startswith("a" * 10) and "[... 73 chars cut ...]" in cut
    assert cut_middle(text, None) == text and cut_middle("short", 30) == "short"
    assert cut_middle("b" * 60, 30) == "b" * 60, "a little over the budget is kept whole"


def _reference_final_and_reasoning(response):
    """final_and_reasoning as first written (a list of messages, then a pass over reasoning items): the
    one-walk version must give the same texts."""
    from ngrp_lib.artifacts.response import parts_text as _parts_text

    items = response.get("output") if isinstance(response, dict) else None
    items = [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []
    messages = [item for item in items if item.get("type") == "message"]
    final = _parts_text(messages[-1].get("content"), ("output_text",)) if messages else ""
    thoughts = []
    for item in items:
        if item.get("type") == "reasoning":
            text = _parts_text(item.get("summary"), ("summary_text",))
            text += _parts_text(item.get("content"), ("reasoning_text",))
            if text:
                thoughts.append(text)
    inline, final = split_think(final)
    if inline:
        thoughts.append(inline)
    return final, "\n\n".join(thoughts)


def test_final_and_reasoning_equals_its_reference_on_random_outputs():
    import random

    rng = random.Random(5)
    texts = ["", " ", "4", "so \\boxed{4}", "<think>hmm</think>42", "a</think>b", "<think>x", "plan"]

    def part(kind):
        return {"type": kind, "text": rng.choice(texts)} if rng.random() < 0.9 else {"type": kind, "text": 3}

    def item():
        kind = rng.choice(["message", "reasoning", "function_call", "other", None])
        if kind == "message":
            content = [part(rng.choice(["output_text", "refusal", "text"])) for _ in range(rng.randint(0, 3))]
            return {"type": "message", "content": rng.choice([content, rng.choice(texts), None])}
        if kind == "reasoning":
            return {
                "type": "reasoning",
                "summary": [part("summary_text") for _ in range(rng.randint(0, 2))],
                "content": rng.choice([None, [part("reasoning_text")], "raw"]),
            }
        return rng.choice([{"type": kind}, "not a dict", 7])

    for _ in range(3000):
        response = rng.choice(
            [{"output": [item() for _ in range(rng.randint(0, 5))]}, {"output": None}, {}, None]
        )
        assert final_and_reasoning(response) == _reference_final_and_reasoning(response), response
