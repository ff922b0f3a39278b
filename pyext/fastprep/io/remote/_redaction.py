"""Credentials kept out of every text an error shows: its message, and the messages of every
exception in its chain (``__cause__``, ``__context__``), which a printed traceback shows too.

A client's own error (botocore's, aiohttp's, fsspec's) may repeat what it was given: the URL with
its user info or signed query string, an endpoint URL with a token, a bucket name that is really
"KEY:SECRET@bucket". So no client exception leaves fastprep as it is: :func:`stand_in` replaces
each one in a chain with a :class:`Redacted` holding its type's name and its text with every known
secret (:func:`secrets_of`) and every URL's credentials (:func:`redact`) taken out, and the
original's traceback (file names and lines, no values).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from urllib.parse import parse_qsl, urlsplit

MASK = "***"
# Keys of storage_options (at any depth) whose values are credentials.
SECRET_KEYS = ("key", "secret", "token", "password", "credential", "sas", "signature", "connection_string",
               "session", "auth")
# Environment variables whose values are credentials: their names hold one of these words.
SECRET_ENV_WORDS = ("SECRET", "TOKEN", "PASSWORD", "ACCESS_KEY", "ACCOUNT_KEY", "STORAGE_KEY", "SAS",
                    "CONNECTION_STRING", "CREDENTIAL")
MIN_ENV_SECRET = 6  # shorter environment values ("1", "true") are not credentials worth masking everywhere
MIN_SECRET = 4  # a password or query value shorter than this is not masked in free text (only in its URL)


def redact(url: str) -> str:
    """A URL as messages and reprs show it: without its user info ("user:token@") and its query
    string (signed URLs' signatures); the raw URL is only for connecting.

    Example:
        >>> redact("https://user:token@host/train.packed?sig=abc")
        'https://host/train.packed'
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url.split("?", 1)[0]
    host, slash, path = rest.split("?", 1)[0].split("#", 1)[0].partition("/")
    return f"{scheme}{sep}{host.rpartition('@')[2]}{slash}{path}"


def url_secrets(url: str) -> list[str]:
    """The parts of a URL that are credentials: its user info (whole, and its password: a user name
    alone, often a word such as a login, is not masked wherever it appears), its query string
    (whole, and each value) and its fragment."""
    if "://" not in url:
        return []
    rest = url.split("://", 1)[1]
    host = rest.split("/", 1)[0].split("?", 1)[0]
    found = []
    if "@" in host:
        info = host.rpartition("@")[0]
        found += [info + "@", *info.split(":", 1)[1:]]
    query = rest.partition("?")[2].split("#", 1)[0]
    if query:
        found += [query, *(v for _, v in parse_qsl(query, keep_blank_values=True))]
    fragment = rest.partition("#")[2]
    if fragment:
        found.append(fragment)
    try:  # what urlsplit reads as the password, where the host part is unusual
        password = urlsplit(url).password
    except ValueError:
        password = None
    if password:
        found.append(password)
    return found


def secrets_of(url: str, options: dict | None = None, environ: dict | None = None) -> list[str]:
    """Every credential a store's errors might repeat: the URL's (:func:`url_secrets`), the values of
    `options` under credential-like keys and the credentials of any URL among its values (an
    endpoint_url), and the environment's credential variables (AWS_SECRET_ACCESS_KEY, ...).
    Longest first, so a secret holding another is masked whole."""
    found = list(url_secrets(url))

    def walk(value: object, secret: bool) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, secret or any(w in str(k).lower() for w in SECRET_KEYS))
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v, secret)
        elif isinstance(value, (str, bytes)):
            text = value.decode(errors="replace") if isinstance(value, bytes) else value
            found.extend(url_secrets(text))
            if secret:
                found.append(text)

    walk(options or {}, False)
    env = os.environ if environ is None else environ
    found += [v for k, v in env.items() if any(w in k.upper() for w in SECRET_ENV_WORDS) and len(v) >= MIN_ENV_SECRET]
    keep = {s for s in found if s and (len(s) >= MIN_SECRET or s.endswith("@"))}
    return sorted(keep, key=len, reverse=True)


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with each of `secrets` masked and every URL in it redacted (and any word's query
    string naming a signature or token)."""
    for secret in secrets:
        text = text.replace(secret, "" if secret.endswith("@") else MASK)
    out = []
    for word in text.split():
        if "://" in word or ("?" in word and any(k in word for k in ("Signature", "X-Amz-", "sig=", "token",
                                                                      "Credential"))):
            word = redact(word)
        out.append(word)
    return " ".join(out)


def describe(exc: BaseException, secrets: Iterable[str] = ()) -> str:
    """An error's text without anything that looks like a credential (see :func:`scrub`)."""
    return scrub(str(exc) or type(exc).__name__, secrets)


class Redacted(Exception):  # noqa: N818 (it stands in for an error, it is not one of its own kind)
    """Stands in for a client's exception in a chain: '<module.Type>: <its text, redacted>', with the
    original's traceback (where it was raised) and its own redacted cause."""


def stand_in(exc: BaseException | None, secrets: Iterable[str] = (), depth: int = 0) -> BaseException | None:
    """A :class:`Redacted` copy of `exc` and of the chain behind it (what a traceback prints: the
    cause, else the context unless suppressed), at most 16 deep; None for None."""
    if exc is None or depth >= 16:
        return None
    secrets = list(secrets)
    kind = type(exc)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    copy = Redacted(f"{name}: {describe(exc, secrets)}").with_traceback(exc.__traceback__)
    behind = exc.__cause__ if exc.__cause__ is not None or exc.__suppress_context__ else exc.__context__
    copy.__cause__ = stand_in(behind, secrets, depth + 1)
    copy.__suppress_context__ = True
    return copy
