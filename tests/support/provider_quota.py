"""A provider's quota as the fake providers enforce it, on loopback.

- `RollingQuota`: a declared quota, requests and tokens per rolling window (a minute on
  the real providers), as OpenAI's and Gemini's per-project limits are described: a
  request past either answers 429.
- `HiddenCapacity`: dynamic shared quota (Gemini on Vertex AI): no number is published;
  the provider admits about `rpm` requests a window, smoothly (a bucket of `burst` of
  the window's requests), and answers 429 when the shared pool is busy. `rpm` may change
  mid-run.

Both count the tokens a request really took (prompt and completion), which is what the
graders' limiters settle their estimates to. Each records what it admitted and refused.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Protocol


class ProviderQuota(Protocol):
    """Admit one request of `tokens` at `now`; None, or the seconds until room."""

    admitted: list[float]
    refused: list[float]

    def admit(self, now: float, tokens: int) -> float | None: ...


class RollingQuota:
    """Requests and tokens per rolling window; 0 tokens: no token limit."""

    def __init__(self, rpm: int, tpm: int = 0, window_s: float = 60.0) -> None:
        self.rpm = rpm
        self.tpm = tpm
        self.window_s = window_s
        self.admitted: list[float] = []
        self.refused: list[float] = []
        self.tokens: list[tuple[float, int]] = []
        self._window: deque[tuple[float, int]] = deque()
        self._used_tokens = 0
        self._lock = threading.Lock()

    def admit(self, now: float, tokens: int) -> float | None:
        with self._lock:
            while self._window and self._window[0][0] <= now - self.window_s:
                self._used_tokens -= self._window.popleft()[1]
            over_requests = len(self._window) + 1 > self.rpm
            over_tokens = bool(self.tpm) and self._used_tokens + tokens > self.tpm
            if over_requests or over_tokens:
                self.refused.append(now)
                oldest = self._window[0][0] if self._window else now
                return max(0.0, oldest + self.window_s - now)
            self._window.append((now, tokens))
            self._used_tokens += tokens
            self.admitted.append(now)
            self.tokens.append((now, tokens))
            return None


class HiddenCapacity:
    """About `rpm` requests a window, smoothly; past them 429. Set `rpm` to change it."""

    def __init__(self, rpm: float, window_s: float = 60.0, burst: float = 1 / 10) -> None:
        self.rpm = rpm
        self.window_s = window_s
        self.burst = burst
        self.admitted: list[float] = []
        self.refused: list[float] = []
        self._bucket = rpm * burst
        self._at: float | None = None
        self._lock = threading.Lock()

    def admit(self, now: float, tokens: int) -> float | None:
        with self._lock:
            rate = self.rpm / self.window_s
            if self._at is not None:
                self._bucket = min(self.rpm * self.burst, self._bucket + (now - self._at) * rate)
            self._at = now
            if self._bucket >= 1:
                self._bucket -= 1
                self.admitted.append(now)
                return None
            self.refused.append(now)
            return (1 - self._bucket) / rate
