"""Explicit Gemini context caches: one per assignment's prompt prefix and model.

Where the price table says it pays (the prefix reaches the model's minimum and the
assignment's answers still to grade save more than the cache's creation and storage,
`PriceTable.explicit_cache_pays`), the first worker to need it claims a record
(`ContextCacheRecords`), creates the cache through google-genai's `caches.create` (the
instructions and the rubric part of the user message) and records its name; every worker
then sends only the answer with `cached_content` set. The cache lives `ttl`; a request
that finds it within `renew_before` of its expiry extends it (`caches.update`), and it is
deleted (`caches.delete`) when its assignment's round is graded. Whatever goes wrong with
a cache (a claim still being made by another worker, a provider error) only means the
request goes out whole, as without one: the provider's implicit caching still applies.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import httpx2
from google.genai import Client, errors, types

from shared.adapters.graders.prompt import RenderedPrompt
from shared.config.prices import PriceTable
from shared.domain.context_cache import ContextCacheRecord
from shared.domain.errors import DependencyUnavailable
from shared.ports import ContextCacheRecords

log = logging.getLogger(__name__)

#: The answers of an assignment's round not yet graded, by assignment id and round.
ExpectedAnswers = Callable[[str, int], int]


class GeminiContextCaches:
    def __init__(
        self,
        client: Client,
        records: ContextCacheRecords,
        prices: PriceTable,
        expected_answers: ExpectedAnswers,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        ttl: timedelta = timedelta(hours=1),
        renew_before: timedelta = timedelta(minutes=10),
        claim_for: timedelta = timedelta(minutes=1),
    ) -> None:
        self._client = client
        self._records = records
        self._prices = prices
        self._expected = expected_answers
        self._clock = clock
        self._ttl = ttl
        self._renew_before = renew_before
        self._claim_for = claim_for
        self._lock = threading.Lock()

    def name_for(self, prompt: RenderedPrompt, model: str) -> str | None:
        """The cache to send `prompt` with, made or renewed if need be; None: send it whole."""
        if not prompt.assignment_id:
            return None
        try:
            with self._lock:  # one instance asks the store for a prefix at a time
                return self._name_for(prompt, prompt.assignment_id, model)
        except DependencyUnavailable as exc:
            log.warning("context cache record unavailable", extra={"reason": exc.detail})
            return None

    @staticmethod
    def _key(prompt: RenderedPrompt, model: str) -> str:
        return f"{prompt.prefix_key()}-{hashlib.sha256(model.encode()).hexdigest()[:8]}"

    def _name_for(self, prompt: RenderedPrompt, assignment_id: str, model: str) -> str | None:
        # Nothing read for a model without explicit caches or a prefix under its minimum.
        price = self._prices.price_of(model)
        tokens = prompt.estimated_prefix_tokens()
        if price is None or price.cache_storage_per_hour is None:
            return None
        if tokens < price.min_cached_prefix_tokens:
            return None
        now = self._clock()
        key = self._key(prompt, model)
        record = self._records.get(key)
        if record is not None and now < record.expire_at:
            if record.creating:
                return None  # another worker is making it
            if record.expire_at - now > self._renew_before:
                return record.name
            return self._renew(record, now)
        # None yet, or an expired cache or a dead creator's claim: worth making one?
        hours = self._ttl.total_seconds() / 3600
        expected = self._expected(assignment_id, prompt.assignment_round)
        if not self._prices.explicit_cache_pays(model, tokens, expected, hours):
            return None
        claim = ContextCacheRecord(key, assignment_id, model, "", now + self._claim_for)
        won = self._records.claim(claim) if record is None else self._records.replace(record, claim)
        if not won:
            return None
        return self._create(prompt, claim)

    def _create(self, prompt: RenderedPrompt, claim: ContextCacheRecord) -> str | None:
        config = types.CreateCachedContentConfig(
            system_instruction=prompt.system,
            contents=[
                types.Content(role="user", parts=[types.Part.from_text(text=prompt.shared_user)])
            ],
            ttl=f"{int(self._ttl.total_seconds())}s",
            display_name=f"gradeq {claim.assignment_id}"[:128],
        )
        try:
            cache = self._client.caches.create(model=claim.model, config=config)
        except (errors.APIError, httpx2.HTTPError) as exc:
            # The claim lapses after `claim_for`; until then the answers go out whole.
            log.warning("context cache not created", extra={"reason": type(exc).__name__})
            return None
        if not cache.name:
            return None
        made = ContextCacheRecord(
            claim.key,
            claim.assignment_id,
            claim.model,
            cache.name,
            cache.expire_time or self._clock() + self._ttl,
        )
        self._records.replace(claim, made)
        log.info(
            "context cache created",
            extra={"assignment_id": claim.assignment_id, "model": claim.model},
        )
        return made.name

    def _renew(self, record: ContextCacheRecord, now: datetime) -> str | None:
        ttl = types.UpdateCachedContentConfig(ttl=f"{int(self._ttl.total_seconds())}s")
        try:
            cache = self._client.caches.update(name=record.name, config=ttl)
        except (errors.APIError, httpx2.HTTPError) as exc:
            log.warning("context cache not renewed", extra={"reason": type(exc).__name__})
            if isinstance(exc, errors.APIError) and exc.code == 404:
                # Gone already: marked expired, so the next request makes a new one.
                self._records.replace(record, dataclasses.replace(record, expire_at=now))
                return None
            return record.name
        renewed = ContextCacheRecord(
            record.key,
            record.assignment_id,
            record.model,
            record.name,
            cache.expire_time or now + self._ttl,
        )
        self._records.replace(record, renewed)  # lost to another renewal: the same cache
        return record.name

    def forget(self, prompt: RenderedPrompt, model: str) -> None:
        """The provider no longer knows the prefix's cache: mark it expired, so the next
        request makes a new one."""
        try:
            record = self._records.get(self._key(prompt, model))
            if record is not None and record.name:
                self._records.replace(record, dataclasses.replace(record, expire_at=self._clock()))
        except DependencyUnavailable as exc:
            log.warning("context cache record unavailable", extra={"reason": exc.detail})

    def delete_for(self, assignment_id: str) -> int:
        """Delete the assignment's caches (its round is graded); how many were deleted."""
        deleted = 0
        for record in self._records.of_assignment(assignment_id):
            if record.name:
                try:
                    self._client.caches.delete(name=record.name)
                    deleted += 1
                except errors.APIError as exc:
                    if exc.code != 404:  # already expired: nothing to delete
                        log.warning(
                            "context cache not deleted", extra={"reason": type(exc).__name__}
                        )
                        continue
                except httpx2.HTTPError as exc:
                    log.warning("context cache not deleted", extra={"reason": type(exc).__name__})
                    continue
            self._records.remove(record.key)
        return deleted
