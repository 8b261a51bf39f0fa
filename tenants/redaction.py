"""Secrets out of what Rewind prints: one function, :func:`redact`, for every URI and message.

A URI reaches output from many sources (``--catalog``, ``REWIND_CATALOG``,
``--iceberg-catalog``, a driver's own error text that quotes it), so the rule
lives here once and the output boundary (the CLI's error printer, every
rendered URI) applies it, rather than each message remembering to.

The rule (docs/promises.md, "Secrets"): ``***`` replaces

* the password of ``scheme://user:password@host`` (the user stays: it helps),
  also without its scheme (``//user:password@host``);
* the value of a query parameter whose name is secret-like (``?password=``,
  ``&sslpassword=``, ``&token=``, ``&key=``, ``X-Amz-Signature=`` ...);
* the value of a ``name=value`` or ``'name': 'value'`` pair with such a name
  anywhere in the text (a libpq conninfo, a repr of S3 settings or of boto3's
  keyword arguments: ``aws_secret_access_key='...'``).

A name is secret-like when, case-insensitive and with ``-``/``.`` read as
``_``, it contains password, passwd, pwd, secret, token, credential or
signature, or ends in access_key, secret_key, private_key, api_key or
account_key; in a URI's query a bare ``key`` is one too. Redacting is
idempotent: ``redact(redact(x)) == redact(x)``.
"""

from __future__ import annotations

import re

MASK = "***"

_WORDS = ("password", "passwd", "pwd", "secret", "token", "credential", "signature")
_SUFFIXES = ("access_key", "secret_key", "private_key", "api_key", "apikey", "account_key")

# scheme://user:password@ ; the password runs to the last '@' before a '/' or a space.
# The scheme is optional: a message that quotes part of a value (after a split on
# ':') may show only ``//user:password@host``.
_USERINFO = re.compile(r"((?:[A-Za-z][A-Za-z0-9+.\-]*:)?//[^:/@\s'\"]*:)[^/\s'\"]*@")
# name=value (a query parameter, a conninfo or keyword pair) and 'name': 'value'.
_VALUE = r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^\s&;,)'"#]*"""
_ASSIGNED = re.compile(rf"(?<![\w.\-])([A-Za-z_][\w.\-]*)(\s*=\s*)({_VALUE})")
_QUOTED = re.compile(rf"""(['"])([A-Za-z_][\w.\-]*)\1(\s*:\s*)({_VALUE})""")


def secret_like(name: str, *, in_query: bool = False) -> bool:
    """Whether a parameter of this name holds a secret (the module doc's rule)."""
    norm = name.lower().replace("-", "_").replace(".", "_")
    if in_query and norm == "key":
        return True
    return any(word in norm for word in _WORDS) or norm.endswith(_SUFFIXES)


def redact(text: str) -> str:
    """``text`` with every secret the module doc names replaced by ``***``.

    Works on a bare URI and on a message or traceback that quotes one.
    """
    text = _USERINFO.sub(rf"\1{MASK}@", text)

    def assigned(match: re.Match[str]) -> str:
        name, eq, value = match.groups()
        start = match.start()
        in_query = start > 0 and match.string[start - 1] in "?&;"
        if not value or not secret_like(name, in_query=in_query):
            return match.group(0)
        return f"{name}{eq}{_masked(value)}"

    def quoted(match: re.Match[str]) -> str:
        quote, name, colon, value = match.groups()
        if not value or not secret_like(name):
            return match.group(0)
        return f"{quote}{name}{quote}{colon}{_masked(value)}"

    return _QUOTED.sub(quoted, _ASSIGNED.sub(assigned, text))


def _masked(value: str) -> str:
    """``***``, in the quotes ``value`` had."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return f"{value[0]}{MASK}{value[0]}"
    return MASK
