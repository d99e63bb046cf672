"""A streaming reader of SGLang ``/generate`` replies that keeps ``meta_info.hidden_states`` as float32.

The reply (``srt/managers/tokenizer_manager.py:2598-2601``) is one JSON object whose
``meta_info.hidden_states`` is a list of *elements*: a prefill element is a list of rows (one row of
``K*H`` floats per prompt token of that forward, ``batch_result_processor.py:651-660``), a decode element is
one row (``:695-700``). Such replies reach hundreds of MB (Kimi-K2.5, 3 slots: 21,504 floats per token), so
the body is never held whole and never given to ``json.loads``:

* outside ``hidden_states`` a small JSON scanner follows the structure (strings, keys, nesting) and copies
  the bytes into a side buffer, where the states' value is replaced by ``null``; that buffer (text,
  output_ids, the other meta_info fields: kilobytes) is parsed with ``json.loads`` at the end;
* inside it, the brackets are found with ``bytes.find`` (memchr: a regex over every byte cost as much as
  the parsing), and every complete row is parsed with ``numpy.fromstring`` into a preallocated
  ``[rows, width]`` float32 array; only an incomplete row is carried between network chunks. This is
  faster than ``json.loads`` of the body (``bench/served_parse.py``), which makes a Python float per value.

Memory is the array, one network chunk and one row. Each row is checked: its float count (the width),
finite values, nothing but numbers, commas and brackets; the structure is checked as it streams (depth at
most 3, no number outside a row). The first error raises :class:`BadStates` naming the element and row.
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass

import numpy as np

from ..states import BadStates

#: the non-state part of a reply (text, output_ids, meta_info without hidden_states) is small; beyond this
#: it is not an SGLang reply of ours
MAX_REST_BYTES = 64 << 20

_STRUCT = re.compile(rb'["{}\[\]:,]')
_SPACE = b" \t\r\n"
_BETWEEN = b" \t\r\n,"


def _blank_float(text: bytes) -> bool:
    """Whether a row that ``numpy.fromstring`` read holds an element of only whitespace (which it reads as
    -1.0): only a row with whitespace can (orjson, which SGLang replies with, writes none: memchr scans)."""
    if not any(c in text for c in (b" ", b"\n", b"\t", b"\r")):
        return False
    squeezed = text.translate(None, _SPACE)
    return b",," in squeezed or squeezed.startswith(b",")


@dataclass(frozen=True)
class Element:
    """One element of ``meta_info.hidden_states``: ``kind`` "prefill" (a list of rows, one forward's prompt
    tokens) or "decode" (one row, one decoded token), and the rows it holds."""

    kind: str
    rows: int


class StatesReader:
    """Feed the reply body chunk by chunk (:meth:`feed`), then :meth:`finish` -> (rest of the reply as a
    dict, ``states [rows, width]`` float32, the elements).

    ``max_rows``: how many rows the request can produce at most (the array is preallocated to it);
    ``width``: the floats per row the launch should give (None: taken from the first row, then enforced)."""

    def __init__(self, max_rows: int, width: int | None, where: str = "reply", width_note: str = ""):
        self.where = where
        self.width_note = f" (= {width_note})" if width_note else ""
        self.width = width
        self.max_rows = max_rows
        self.out: np.ndarray | None = np.empty((max_rows, width), np.float32) if width else None
        self.rows = 0
        self.elements: list[Element] = []
        self.rest = bytearray()
        self.received = 0
        # outside the states: JSON structure
        self._scan = 0  # next byte of self.rest to scan
        self._stack: list[list] = []  # [kind "o"/"a", current key, expecting a key]
        self._in_states = False
        self._done_states = False
        self._closed = False  # the top-level value ended
        # inside the states
        self._buf = b""
        self._depth = 0
        self._open_at = -1  # position in _buf of the '[' of the row being read, or -1
        self._elem_kind: str | None = None
        self._elem_rows = 0

    # ------------------------------------------------------------------ feeding

    def feed(self, chunk: bytes) -> None:
        self.received += len(chunk)
        while chunk:
            if self._in_states:
                chunk = self._feed_states(chunk)
            else:
                chunk = self._feed_outside(chunk)

    def _feed_outside(self, chunk: bytes) -> bytes:
        self.rest += chunk
        if len(self.rest) > MAX_REST_BYTES:
            raise BadStates(f"{self.where}: more than {MAX_REST_BYTES >> 20} MiB outside meta_info.hidden_states")
        split = self._scan_outside()
        if split is None:
            return b""
        # the states' value starts at self.rest[split] ('['): keep the rest of this chunk for the states
        tail = bytes(self.rest[split:])
        del self.rest[split:]
        self.rest += b"null"
        self._scan = len(self.rest)
        self._in_states = True
        return tail

    def _scan_outside(self) -> int | None:
        """Follow the JSON structure over the unscanned bytes of ``rest``; the offset where the value of
        top-level ``meta_info.hidden_states`` starts, or None (need more bytes)."""
        buf, i = self.rest, self._scan
        n = len(buf)
        while i < n:
            m = _STRUCT.search(buf, i)
            if m is None:
                i = n
                break
            j = m.start()
            c = buf[j]
            if c == 0x22:  # a string: find its unescaped end
                k = j + 1
                while True:
                    k = buf.find(b'"', k)
                    if k < 0:
                        self._scan = j  # wait for the rest of the string
                        return None
                    bs = 0
                    while buf[k - 1 - bs] == 0x5C:
                        bs += 1
                    if bs % 2 == 0:
                        break
                    k += 1
                if self._stack and self._stack[-1][0] == "o" and self._stack[-1][2]:
                    try:
                        self._stack[-1][1] = json.loads(bytes(buf[j:k + 1]))
                    except ValueError:
                        raise BadStates(f"{self.where}: a key is not a JSON string") from None
                    self._stack[-1][2] = False
                i = k + 1
                continue
            if c == 0x3A:  # ':' -> a value follows; is it meta_info.hidden_states?
                path = [e[1] for e in self._stack]
                if len(self._stack) == 2 and path == ["meta_info", "hidden_states"] and self._stack[0][0] == "o" \
                        and self._stack[1][0] == "o" and not self._done_states:
                    k = j + 1
                    while k < n and buf[k] in b" \t\r\n":
                        k += 1
                    if k == n:
                        self._scan = j
                        return None
                    if buf[k] == 0x5B:  # '['
                        self._done_states = True
                        return k
                i = j + 1
                continue
            if c in (0x7B, 0x5B):  # '{' '['
                if self._closed:
                    raise BadStates(f"{self.where}: data after the end of the JSON value")
                self._stack.append(["o" if c == 0x7B else "a", None, c == 0x7B])
            elif c in (0x7D, 0x5D):  # '}' ']'
                if not self._stack:
                    raise BadStates(f"{self.where}: unbalanced brackets")
                self._stack.pop()
                if not self._stack:
                    self._closed = True
            elif c == 0x2C and self._stack and self._stack[-1][0] == "o":  # ','
                self._stack[-1][2] = True
            i = j + 1
        self._scan = i
        return None

    def _feed_states(self, chunk: bytes) -> bytes:
        # the carried part of an unfinished row (starting at its '['), then the new bytes
        buf = self._buf + chunk if self._buf else chunk
        open_at = self._open_at
        last = 0
        i = open_at + 1 if open_at >= 0 else 0
        n = len(buf)
        # brackets are found with bytes.find (memchr), not a regex: a regex over every byte of a row cost as
        # much as parsing it (bench/served_parse.py)
        close = buf.find(b"]", i)
        while True:
            if 0 <= close < i:
                close = buf.find(b"]", i)
            j = buf.find(b"[", i, close if close >= 0 else n)
            if j < 0:
                if close < 0:
                    break
                j = close
            if j != close:  # '['
                if open_at >= 0:  # a '[' inside a row: the row was a list of lists
                    self._between(buf[open_at + 1:j])
                else:
                    self._between(buf[last:j])
                self._depth += 1
                if self._depth > 3:
                    raise BadStates(f"{self.where}: hidden_states nested deeper than element/row/float")
                if self._depth == 2:
                    self._elem_kind, self._elem_rows = None, 0
                elif self._depth == 3:
                    if self._elem_kind == "decode":
                        raise BadStates(f"{self.where}: hidden_states element {len(self.elements)} mixes floats "
                                        "and rows")
                    self._elem_kind = "prefill"
                open_at = j if self._depth >= 2 else -1
                last = j + 1
            else:  # ']'
                if open_at >= 0:  # the end of a row
                    if self._depth == 2:
                        if self._elem_kind == "prefill":
                            raise BadStates(f"{self.where}: hidden_states element {len(self.elements)} mixes "
                                            "rows and floats")
                        self._elem_kind = "decode"
                    self._row(buf[open_at + 1:j])
                    open_at = -1
                else:
                    self._between(buf[last:j])
                self._depth -= 1
                if self._depth == 1:  # an element ends
                    if self._elem_kind is None:
                        raise BadStates(f"{self.where}: hidden_states element {len(self.elements)} is empty")
                    self.elements.append(Element(self._elem_kind, self._elem_rows))
                if self._depth == 0:  # the end of hidden_states: back to the outer JSON
                    self._buf, self._open_at = b"", -1
                    self._in_states = False
                    return buf[j + 1:]
                last = j + 1
            i = j + 1
        if open_at >= 0:  # carry the unfinished row
            self._buf, self._open_at = buf[open_at:], 0
        else:
            self._between(buf[last:])
            self._buf, self._open_at = b"", -1
        if len(self._buf) > 64 * (self.width or 1 << 20) + 4096:
            raise BadStates(f"{self.where}: a hidden-states row longer than {self.width} floats could be")
        return b""

    def _between(self, gap: bytes) -> None:
        if gap.strip(_BETWEEN):
            raise BadStates(f"{self.where}: hidden_states element {len(self.elements)}: "
                            f"{bytes(gap.strip(_BETWEEN)[:40])!r} outside a row of floats")

    def _row(self, text: bytes) -> None:
        where = f"{self.where}: hidden_states element {len(self.elements)} row {self._elem_rows}"
        if self.rows >= self.max_rows:
            raise BadStates(f"{self.where}: more than {self.max_rows} rows of hidden states (the prompt and the "
                            "decoded tokens cannot have more)")
        # numpy parses the row (the same correctly rounded decimal -> double -> float32 as json.loads and a
        # cast) and stops with an error at anything but numbers and commas; three things it lets through are
        # checked here without another pass over the row: a trailing comma (dropped), a row of only
        # whitespace (read as [-1.0]) and an element of only whitespace between two commas (read as -1.0)
        tail = text[-8:].rstrip(_SPACE) or text.rstrip(_SPACE)[-8:]
        vals, count = None, 0
        if tail:
            try:
                with warnings.catch_warnings():  # numpy < 2.3 warns (DeprecationWarning) instead
                    warnings.simplefilter("error")
                    vals = np.fromstring(text, dtype=np.float32, sep=",")
            except (ValueError, DeprecationWarning):
                raise BadStates(f"{where}: not a list of numbers") from None
            count = vals.size + tail.endswith(b",")
        if self.width is None:
            if count == 0:
                raise BadStates(f"{where} is empty")
            self.width = count
            self.out = np.empty((self.max_rows, count), np.float32)
        if count != self.width:
            raise BadStates(f"{where} holds {count} floats, expected {self.width}{self.width_note}: the server "
                            "captures another number of slots or another hidden size than its launch should give")
        if count != vals.size or ((vals == -1.0).any() and _blank_float(text)):
            raise BadStates(f"{where}: not a list of numbers")
        if not np.isfinite(vals).all():
            raise BadStates(f"{where}: non-finite value at float {int(np.flatnonzero(~np.isfinite(vals))[0])}")
        self.out[self.rows] = vals
        self.rows += 1
        self._elem_rows += 1

    # ------------------------------------------------------------------ the end

    @property
    def saw_states(self) -> bool:
        """Whether the reply held a ``meta_info.hidden_states`` list."""
        return self._done_states

    def finish(self) -> tuple[dict, np.ndarray, tuple[Element, ...]]:
        if self._in_states:
            raise BadStates(f"{self.where}: the reply ended inside meta_info.hidden_states after "
                            f"{self.received} bytes ({self.rows} rows read)")
        try:
            rest = json.loads(bytes(self.rest))
        except (ValueError, RecursionError):
            raise BadStates(f"{self.where}: the reply is not complete JSON ({self.received} bytes received)") from None
        if not isinstance(rest, dict):
            raise BadStates(f"{self.where}: expected a JSON object")
        out = self.out if self.out is not None else np.empty((0, self.width or 0), np.float32)
        return rest, out[: self.rows], tuple(self.elements)
