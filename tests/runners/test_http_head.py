"""The answer's head as every Python model bounds it (cxlab_runner.http_head): HeadReader fed
lines (the blocking and asyncio clients), HeadMeter fed raw bytes however they are split
(locust's geventhttpclient), both refusing exactly the heads over the bound, interim answers'
heads counted with the final one's."""

from __future__ import annotations

import io
import random

import pytest

from cxlab_runner.http_head import Body, Head, HeadMeter, HeadReader, HeadTooLarge, ProtocolError

INTERIM = b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
FINAL = b"HTTP/1.1 200 OK\r\nX-A: b\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\n"
STREAM = INTERIM + FINAL + b"ok"
HEADS = len(INTERIM) + len(FINAL)


def _read(limit: int, data: bytes = STREAM) -> tuple[Head, bytes]:
    reader, stream = HeadReader(limit), io.BytesIO(data)
    while (head := reader.line(stream.readline(reader.left + 1))) is None:
        pass
    return head, stream.read()


def _meter(limit: int, data: bytes, cuts: list[int]) -> HeadMeter:
    meter = HeadMeter(limit)
    for start, end in zip([0, *cuts], [*cuts, len(data)], strict=True):
        if not meter.done:
            meter.feed(data[start:end])
    return meter


def test_a_head_of_the_bound_is_read_and_one_byte_more_is_refused() -> None:
    head, rest = _read(HEADS)
    assert rest == b"ok"  # read to the end of the final head, not a byte further
    assert head == _read(HEADS + 100)[0]
    with pytest.raises(HeadTooLarge, match=str(HEADS - 1)):
        _read(HEADS - 1)


@pytest.mark.parametrize("seed", range(20))
def test_the_meter_counts_the_same_bytes_however_they_are_split(seed: int) -> None:
    draw = random.Random(seed)
    cuts = sorted(draw.sample(range(1, len(STREAM)), draw.randint(1, 40)))
    assert _meter(HEADS, STREAM, cuts).done
    with pytest.raises(HeadTooLarge):
        _meter(HEADS - 1, STREAM, cuts)


def test_a_line_feed_alone_ends_lines_and_the_head_too() -> None:
    bare = b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok"
    assert _read(1000, bare)[1] == b"ok"
    assert _meter(len(bare) - 2, bare, [17, 18]).done
    with pytest.raises(HeadTooLarge):
        _meter(len(bare) - 3, bare, [17, 18])


def test_the_head_says_how_its_body_is_framed() -> None:
    head, _ = _read(1000)
    assert head.status == 200 and head.body(head_request=False) == (Body.LENGTH, 2)
    assert not head.closes
    cases = {
        b"Transfer-Encoding: gzip, chunked\r\nContent-Length: 5": (Body.CHUNKED, 0),
        b"Transfer-Encoding: gzip": (Body.CLOSE, 0),
        b"X-None: 1": (Body.CLOSE, 0),
        b"Content-Length: 7, 7": (Body.LENGTH, 7),
    }
    for fields, framing in cases.items():
        head, _ = _read(1000, b"HTTP/1.1 200 OK\r\n" + fields + b"\r\n\r\n")
        assert head.body(head_request=False) == framing, fields
        assert head.body(head_request=True) == (Body.NONE, 0)
    head, _ = _read(1000, b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n")
    with pytest.raises(ProtocolError):
        head.body(head_request=False)
    with pytest.raises(ProtocolError, match=r"not an HTTP/1\.x answer"):
        _read(1000, b"SSH-2.0-OpenSSH\r\n\r\n")
    with pytest.raises(ProtocolError, match="closed in the answer's headers"):
        _read(1000, b"HTTP/1.1 200 OK\r\nX-A: b\r\n")
