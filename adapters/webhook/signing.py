"""A webhook's signature and its replay window: the pure parts of checking a signed
request, apart from reading it.

A platform signs a timestamp (and often the body) with a shared secret. A request is
taken when its timestamp lies within the window around now (on the injected clock) and
its (timestamp, signature) pair has not been taken before: a captured request sent
again is refused even when its signature covers no byte of the body. Only genuine pairs
are remembered, each until its timestamp leaves the window (after which the window
refuses it anyway), so what is kept is bounded by real traffic.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import hmac
from dataclasses import dataclass

from memory_core.base.clock import Clock, system_clock


@dataclass(frozen=True, slots=True)
class SignedPair:
    """A request's signed timestamp (milliseconds since the epoch, digits) and its
    signature, as the request carries them."""

    timestamp: str
    sign: str

    @property
    def timestamp_ms(self) -> int:
        return int(self.timestamp)

    @classmethod
    def of(cls, timestamp: str | None, sign: str | None) -> SignedPair | None:
        """The pair from a request's two headers; None when either is missing or the
        timestamp is not digits (a sign, a decimal point or an exponent is no time)."""
        if not timestamp or not sign or not timestamp.isascii() or not timestamp.isdigit():
            return None
        return cls(timestamp, sign)


def hmac_sha256_b64(secret: str, message: bytes) -> str:
    """base64(HMAC-SHA256(secret, message)): the signature most webhook platforms use."""
    digest = hmac.new(secret.encode("utf-8"), message, hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def same_sign(expected: str, given: str) -> bool:
    """Constant-time comparison of a signature computed here with one a request carries.
    As bytes: compare_digest raises TypeError for a str with non-ASCII characters, and a
    forged header must be refused (403), not crash the handler (500)."""
    return hmac.compare_digest(expected.encode("ascii"), given.encode("utf-8", "surrogateescape"))


class ReplayWindow:
    """The signed pairs taken so far: each genuine pair once, while its timestamp is
    within `max_age_seconds` of now (on `clock`)."""

    def __init__(self, max_age_seconds: int, clock: Clock = system_clock) -> None:
        self.max_age_ms = max_age_seconds * 1000
        self._clock = clock
        self._seen: set[SignedPair] = set()
        self._by_age: list[tuple[int, str, str]] = []

    def now_ms(self) -> int:
        return int(self._clock().timestamp() * 1000)

    def fresh(self, timestamp_ms: int) -> bool:
        """Whether a timestamp lies within the window around now (either side: a clock
        a little ahead is not a forgery)."""
        return abs(self.now_ms() - timestamp_ms) <= self.max_age_ms

    def take(self, pair: SignedPair) -> bool:
        """True the first time a verified pair is offered within the window; False when
        it is stale or was taken before (a replay)."""
        now_ms = self.now_ms()
        if abs(now_ms - pair.timestamp_ms) > self.max_age_ms:
            return False
        self._forget_before(now_ms - self.max_age_ms)
        if pair in self._seen:
            return False
        self._seen.add(pair)
        heapq.heappush(self._by_age, (pair.timestamp_ms, pair.timestamp, pair.sign))
        return True

    def _forget_before(self, oldest_ms: int) -> None:
        while self._by_age and self._by_age[0][0] < oldest_ms:
            _, timestamp, sign = heapq.heappop(self._by_age)
            self._seen.discard(SignedPair(timestamp, sign))

    def __len__(self) -> int:
        return len(self._seen)
