"""A kernel's identity for merging: two sources that differ only in comments, indentation width
or blank lines are the same kernel, and the search keeps one node for them."""

from __future__ import annotations

import hashlib
import io
import tokenize

_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING}


def normalized(source: str) -> str:
    """The source's tokens without comments and layout; the text itself when it does not
    tokenize."""
    try:
        # an indent is a token whatever its width: re-indenting does not make another kernel
        tokens = [
            "<indent>" if t.type == tokenize.INDENT else t.string
            for t in tokenize.generate_tokens(io.StringIO(source).readline)
            if t.type not in _SKIP
        ]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return "\n".join(line.rstrip() for line in source.splitlines() if line.strip())
    return " ".join(tokens)


def kernel_hash(source: str) -> str:
    return hashlib.sha256(normalized(source).encode("utf-8")).hexdigest()[:16]
