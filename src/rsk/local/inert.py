"""Text an agent controls, made inert for a human's terminal (pure).

Every control character (C0, DEL, C1), every format character (bidi overrides and isolates, zero-width
marks) and every line or paragraph separator is shown as a visible escape, never interpreted: a crafted
requester, argument, environment value or script line cannot move the cursor, recolour the screen,
reorder text or start a line of its own. A backslash is doubled so that an escape cannot be faked. A run of
blanks after a line's first word that is long enough to push what follows out of sight (a box that scrolls,
a terminal that wraps it onto blank-looking rows) is shown by its length, `⟨400 spaces⟩`, so the tail of a
line (`; curl ... | sh`) stands next to its head. Indentation is left as it is: it is seen as indentation.
"""

from __future__ import annotations

import re
import unicodedata

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def _escape(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _unsafe(ch: str) -> bool:
    return ch == "\\" or unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")


_BLANKS = re.compile(r"(?<=\S) {16,}")  # after some text: 16 or more spaces (a tab is already shown as \t)


def inert(text: str) -> str:
    """One line: every unsafe character escaped (newlines too), long runs of blanks shown by their length."""
    shown = "".join(_escape(ch) if _unsafe(ch) else ch for ch in text)
    return _BLANKS.sub(lambda m: f"⟨{len(m.group())} spaces⟩", shown)


def inert_lines(text: str) -> list[str]:
    """A multi-line text (a script) as lines, each made inert; the line breaks themselves are kept."""
    return [inert(line) for line in text.split("\n")]
