"""The helper's hand-rolled JSON must agree with json for every frame that can occur."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exec_helper import protocol

scalars = st.one_of(st.text(), st.integers(-(2**53), 2**53), st.booleans(), st.none())
flat = st.dictionaries(st.text(), scalars, max_size=8)


@given(flat)
def test_server_frames_decode_like_json(doc: dict) -> None:
    for text in (
        json.dumps(doc),
        json.dumps(doc, separators=(",", ":")),
        json.dumps(doc, ensure_ascii=False),
    ):
        assert protocol.decode_flat(text) == doc


@given(st.dictionaries(st.text(), st.one_of(scalars, st.lists(st.text(), max_size=4)), max_size=8))
def test_helper_requests_are_json(doc: dict) -> None:
    encoded = protocol.encode(doc)
    assert json.loads(encoded) == {k: v for k, v in doc.items()}
    encoded.decode("ascii")  # no raw non-ASCII on the wire


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        "[]",
        '{"a":{"b":1}}',
        '{"a":[1]}',
        '{"a":1,}',
        '{"a":1} x',
        '{"a" 1}',
        '{"a":"\\x"}',
        '{"a":1.5}',
    ],
)
def test_decode_refuses_what_is_not_a_flat_object(text: str) -> None:
    with pytest.raises(protocol.ProtocolError):
        protocol.decode_flat(text)


def test_frame_limits() -> None:
    assert protocol.frame(b"abc") == b"\x00\x00\x00\x03abc"
    with pytest.raises(protocol.ProtocolError):
        protocol.frame(b"x" * (protocol.MAX_FRAME + 1))
    with pytest.raises(protocol.ProtocolError):
        protocol.frame_length((protocol.MAX_FRAME + 1).to_bytes(4, "big"))
