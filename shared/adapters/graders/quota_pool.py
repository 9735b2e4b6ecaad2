"""One provider quota shared by every worker instance: the pool's rules, on plain state.

The pool is one small document per provider and model in the job store. Instances take
short-lived *slices* of the minute's budget from it, each with one conditional write:

- Grants are counted in buckets of 1/300 of the window. A grant counts from when it is
  taken until a full window after its lease ends (the latest moment its requests may be
  sent) and a margin for the way to the provider, so the requests a provider sees in
  any rolling window never pass the quota, whoever sent them and however late within
  their lease.
- Grants are paced: at most 1/10 of the quota in any 1/10 of the window (1/30 for an
  adaptive limit, which meets providers that admit a rate rather than a window), so slots
  free up every few seconds for the exam lane instead of a minute's budget going out in
  one burst.
- A lane is granted only what is left after the jobs of higher lanes waiting in any
  instance (each instance reports its waiting jobs per lane with its takes); a lane below
  its `min_quota_share` of the window is granted first.
- What a slice did not use is given back with the holder's next take, and the tokens a
  request really took replace its estimate. A dead instance gives nothing back, but it
  holds at most one slice (one lease, 1/30 of the window: 2 s) and no share of the future.

Where no quota is declared the pool's limit is found by measurement (`adapt`): a slow
start, then additive increase while the demand meets the limit; on 429s a cut to the
share of the requests the provider admitted, on rising latency by a tenth; decided once
per epoch on the outcomes every instance reports. The learned limit is held as a rate
over one epoch (not a window), so a cut takes effect at once.

Everything here is a pure function of the state and an explicit `now` (seconds on a clock
the instances share: wall time), so it is tested on a fake clock; the adapters only read
and conditionally write the document.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: The pool's granularity: a window is this many buckets, this many leases, and this
#: many pacing parts.
BUCKETS = 300
LEASES = 30
PARTS = 10
ADAPTIVE_PARTS = 30
#: A grant counts a quarter lease longer than its lease, and at least MARGIN_S: a
#: request sent at the lease's end still reaches the provider a little later (0.5 s of a
#: minute's window).
MARGIN = 0.25
MARGIN_S = 0.1


@dataclass(frozen=True)
class PoolLimits:
    """The quota the pool hands out; `adaptive` when the limit is found by measurement."""

    rpm: int
    tpm: int = 0  # 0: no token limit
    window_s: float = 60.0
    adaptive: Adaptive | None = None
    parts: int = PARTS

    @property
    def bucket_s(self) -> float:
        return self.window_s / BUCKETS

    @property
    def lease_s(self) -> float:
        """How long a slice may be used."""
        return self.window_s / LEASES

    @property
    def counted_s(self) -> float:
        """How long after it is taken a grant's requests may still reach the provider."""
        return self.lease_s + max(self.lease_s * MARGIN, MARGIN_S)

    @property
    def part_s(self) -> float:
        """The pacing part: at most 1/parts of the quota is granted in any part."""
        return self.window_s / self.parts

    def rpm_now(self, state: Mapping[str, Any]) -> int:
        """The requests a window may hold now: declared, or the adaptive limit."""
        if self.adaptive is None:
            return self.rpm
        limit = float(adaptive_state(state, self)["limit"])
        return max(self.adaptive.min_rpm, math.floor(limit))


@dataclass(frozen=True)
class Adaptive:
    """The controller's constants: AIMD on 429s and latency, once per epoch (`adapt`).

    `slow_start`: before the first cut the limit grows by this factor each full epoch.
    `increase`: the additive step, a fraction of the limit where the last cut left it.
    An epoch with more than `tolerated` of its requests answered 429 (and more than one)
    cuts the limit to the share admitted x `margin` (at most by half); fewer 429s hold
    it at the capacity. `latency_factor`: an epoch whose mean latency passes this
    multiple of the lowest epoch mean seen cuts the limit by `decrease`.
    """

    start_rpm: int = 60
    min_rpm: int = 1
    max_rpm: int = 1_000_000
    epochs_per_window: int = 4
    increase: float = 0.03
    decrease: float = 0.9
    margin: float = 0.95
    slow_start: float = 1.5
    latency_factor: float = 2.0
    tolerated: float = 0.01


@dataclass(frozen=True)
class LaneRank:
    """A lane's rank for the quota and the share of it the lane is always granted."""

    priority: int
    min_share: float = 0.0


@dataclass(frozen=True)
class Outcomes:
    """What a holder's requests met since its last take (for the adaptive limit)."""

    ok: int = 0
    throttled: int = 0
    latency_sum_s: float = 0.0

    def __add__(self, other: Outcomes) -> Outcomes:
        return Outcomes(
            self.ok + other.ok,
            self.throttled + other.throttled,
            self.latency_sum_s + other.latency_sum_s,
        )


@dataclass(frozen=True)
class Giveback:
    """Part of an earlier grant: requests never sent, and the tokens' correction (signed)."""

    bucket: int
    lane: str
    requests: int = 0
    tokens: int = 0


@dataclass(frozen=True)
class Take:
    """One holder asking for a slice for `lane`, reporting what it owes the pool."""

    holder: str
    lane: str
    requests: int
    tokens_each: int
    waiting: Mapping[str, int] = field(default_factory=dict)
    waiting_until: float = 0.0
    givebacks: Sequence[Giveback] = ()
    outcomes: Outcomes = Outcomes()


@dataclass(frozen=True)
class Grant:
    """The slice granted (0 requests: none, with the time until room may free up)."""

    bucket: int
    requests: int
    tokens: int
    expires_at: float
    retry_after_s: float = 0.0


def take(
    state: Mapping[str, Any] | None,
    ask: Take,
    limits: PoolLimits,
    lanes: Mapping[str, LaneRank],
    now: float,
) -> tuple[dict[str, Any], Grant]:
    """The pool after `ask`, and the slice granted to it."""
    new = _copy(state)
    _give_back(new, ask.givebacks)
    _expire(new, limits, now)
    _report_waiting(new, ask, now)
    if limits.adaptive is not None:
        adapt(new, limits, ask.outcomes, now)
    rpm = limits.rpm_now(new)
    buckets: list[list[Any]] = new["buckets"]
    used_r = sum(b[1] for b in buckets)
    used_t = sum(b[2] for b in buckets)
    # A grant's bucket is where its lease (and margin) ends, after it was taken.
    shift = limits.counted_s - limits.part_s
    recent = [b for b in buckets if b[0] * limits.bucket_s > now + shift]
    pace = max(1, math.ceil(rpm / limits.parts))
    free = pace - sum(b[1] for b in recent)
    if limits.adaptive is None:
        free = min(free, rpm - used_r)
    else:
        # A learned limit is a rate, held over one epoch (not the window): a cut takes
        # effect within the epoch, with no quiet time while a window's grants leave.
        horizon = limits.window_s / limits.adaptive.epochs_per_window
        held = [b for b in buckets if b[0] * limits.bucket_s > now + limits.counted_s - horizon]
        free = min(free, math.floor(rpm * horizon / limits.window_s) - sum(b[1] for b in held))
    free -= _reserve(new, ask.lane, lanes, rpm, now)
    n = min(ask.requests, free)
    if limits.tpm and ask.tokens_each > 0:
        room = limits.tpm - used_t
        fits = room // ask.tokens_each
        if fits < 1 and used_t == 0:
            fits = 1  # larger than the whole token quota: alone in an empty window
        n = min(n, fits)
    if n < 1:
        if limits.adaptive is not None:
            new["adaptive"]["refused"] += 1  # the demand passed the limit
        wait = _retry_after(buckets, recent, limits, now)
        if ask.requests < 1:
            return new, Grant(0, 0, 0, now, wait)  # a report, no request
        # The refused request waits in its lane from now on: lower lanes leave it room.
        entry = new["waiting"].setdefault(ask.holder, {"until": 0.0, "lanes": {}})
        entry["lanes"][ask.lane] = entry["lanes"].get(ask.lane, 0) + 1
        entry["until"] = max(entry["until"], now + wait + 2 * limits.lease_s)
        return new, Grant(0, 0, 0, now, wait)
    bucket = math.floor((now + limits.counted_s) / limits.bucket_s)
    tokens = n * ask.tokens_each
    _add(new, bucket, ask.lane, n, tokens)
    if limits.adaptive is not None:
        new["adaptive"]["granted"] += n
    return new, Grant(bucket, n, tokens, now + limits.lease_s)


def adaptive_state(state: Mapping[str, Any], limits: PoolLimits) -> dict[str, Any]:
    """The controller's state in the pool, started at `start_rpm` when there is none."""
    found = state.get("adaptive")
    if isinstance(found, dict):
        return found
    assert limits.adaptive is not None
    return {
        "limit": float(limits.adaptive.start_rpm),
        "ssthresh": 0.0,
        "epoch_at": None,
        "ok": 0,
        "throttled": 0,
        "latency_sum_s": 0.0,
        "granted": 0,
        "refused": 0,
        "cut_at": None,
        "run": 0,
        "base_latency_s": 0.0,
        "last": {},
    }


def adapt(state: dict[str, Any], limits: PoolLimits, outcomes: Outcomes, now: float) -> None:
    """Count `outcomes`, and at each epoch's end move the limit (AIMD)."""
    config = limits.adaptive
    assert config is not None
    a = adaptive_state(state, limits)
    state["adaptive"] = a
    a["ok"] += outcomes.ok
    a["throttled"] += outcomes.throttled
    a["latency_sum_s"] += outcomes.latency_sum_s
    if a["epoch_at"] is None:
        a["epoch_at"] = now
        return
    epoch_s = limits.window_s / config.epochs_per_window
    if now < a["epoch_at"] + epoch_s:
        return
    limit = float(a["limit"])
    answered = a["ok"] + a["throttled"]
    mean = a["latency_sum_s"] / a["ok"] if a["ok"] else 0.0
    base = float(a["base_latency_s"])
    slow = bool(mean and base and mean > base * config.latency_factor)
    # The demand met the limit: the pool refused a take in the epoch, and the requests
    # answered reached half of the limit (the last lease's sends are reported late, and
    # a limit twice the demand is not raised further); three quarters of it in the slow
    # start, whose steps are large.
    elapsed = now - a["epoch_at"]
    reached = 0.5 if a["ssthresh"] else 0.75
    full = a["refused"] > 0 and answered >= reached * limit * elapsed / limits.window_s
    # The 429s an epoch reports may answer requests granted before the last cut: the
    # epoch right after a cut neither cuts again nor grows.
    settling = a["cut_at"] is not None and now - a["cut_at"] <= 1.5 * epoch_s
    # One 429 (or 1 % of the epoch's requests) is the provider's noise, not a signal.
    congested = a["throttled"] > max(1, config.tolerated * answered)
    if settling:
        reason = "settle"
    elif congested or slow:
        if congested:
            # Past the capacity the provider admitted the share `ok / answered` of what
            # was sent: the limit goes to that share of itself, less a margin (at most
            # by half); out of a slow start, at least back to its last step's limit.
            cut = max(0.5, config.margin * a["ok"] / answered)
            limit *= cut if a["ssthresh"] else min(cut, 1 / config.slow_start)
        else:
            limit *= config.decrease
        a["ssthresh"] = limit
        a["cut_at"] = now
        a["run"] = 0
        reason = "throttled" if congested else "latency"
    elif not a["ssthresh"]:
        # The slow start: the limit grows by half each full epoch until the first 429s;
        # a few of them end it where it is.
        if a["throttled"]:
            a["ssthresh"] = limit
            reason = "hold"
        elif full:
            limit *= config.slow_start
            reason = "increase"
        else:
            reason = "hold"  # the demand is below the limit: nothing to learn
    else:
        # The capacity the last cut measured: the limit at which everything sent would
        # have been admitted.
        capacity = a["ssthresh"] / config.margin
        if a["throttled"] and limit >= capacity:
            a["run"] = 0
            reason = "hold"  # one 429 or a few at the capacity: the limit stays there
        elif full:
            # Additive steps (a stray 429 below the capacity does not stop them). After
            # three epochs in a row past the capacity without a 429, each further one
            # adds a step more: a capacity that rose is found in a few epochs, one that
            # did not is passed by single steps.
            a["run"] = a["run"] + 1 if limit >= capacity else 0
            limit += max(1.0, config.increase * a["ssthresh"]) * max(1, a["run"] - 2)
            reason = "increase"
        else:
            reason = "hold"  # the demand is below the limit: nothing to learn
    if mean and not slow:
        a["base_latency_s"] = min(base, mean) if base else mean
    a["limit"] = min(float(config.max_rpm), max(float(config.min_rpm), limit))
    a["last"] = {
        "at": now,
        "answered": answered,
        "throttled": a["throttled"],
        "latency_s": round(mean, 4),
        "decision": reason,
    }
    a.update(epoch_at=now, ok=0, throttled=0, latency_sum_s=0.0, granted=0, refused=0)


def status(state: Mapping[str, Any] | None, limits: PoolLimits, now: float) -> dict[str, Any]:
    """What the pool holds now: the window's use per lane, waiting jobs, the limit."""
    current = _copy(state)
    _expire(current, limits, now)
    by_lane: dict[str, int] = {}
    for b in current["buckets"]:
        for lane, n in b[3].items():
            by_lane[lane] = by_lane.get(lane, 0) + n
    waiting: dict[str, int] = {}
    for entry in current["waiting"].values():
        for lane, n in entry["lanes"].items():
            waiting[lane] = waiting.get(lane, 0) + n
    report: dict[str, Any] = {
        "mode": "adaptive" if limits.adaptive else "declared",
        "window_s": limits.window_s,
        "limit_rpm": limits.rpm_now(current),
        "limit_tpm": limits.tpm,
        "requests_in_window": sum(b[1] for b in current["buckets"]),
        "tokens_in_window": sum(b[2] for b in current["buckets"]),
        "requests_by_lane": by_lane,
        "waiting_by_lane": waiting,
        "instances_waiting": len(current["waiting"]),
    }
    if limits.adaptive is not None:
        a = adaptive_state(current, limits)
        report["adaptive"] = {
            "limit_rpm": round(float(a["limit"]), 1),
            "ssthresh_rpm": round(float(a["ssthresh"]), 1),
            "base_latency_s": round(float(a["base_latency_s"]), 4),
            "last_epoch": a["last"],
        }
    return report


def _copy(state: Mapping[str, Any] | None) -> dict[str, Any]:
    state = state or {}
    return {
        "buckets": [[b[0], b[1], b[2], dict(b[3])] for b in state.get("buckets", [])],
        "waiting": {
            h: {"until": w["until"], "lanes": dict(w["lanes"])}
            for h, w in state.get("waiting", {}).items()
        },
        **({"adaptive": dict(state["adaptive"])} if "adaptive" in state else {}),
    }


def _give_back(state: dict[str, Any], givebacks: Sequence[Giveback]) -> None:
    for back in givebacks:
        for b in state["buckets"]:
            if b[0] == back.bucket:
                b[1] = max(0, b[1] - back.requests)
                b[2] = max(0, b[2] + back.tokens)
                if back.lane in b[3]:
                    b[3][back.lane] = max(0, b[3][back.lane] - back.requests)
                break


def _expire(state: dict[str, Any], limits: PoolLimits, now: float) -> None:
    """Drop the buckets a full window past their end, and lapsed waiting reports."""
    width = limits.bucket_s
    state["buckets"] = [
        b
        for b in state["buckets"]
        if (b[0] + 1) * width + limits.window_s > now and (b[1] > 0 or b[2] > 0)
    ]
    state["waiting"] = {h: w for h, w in state["waiting"].items() if w["until"] > now}


def _report_waiting(state: dict[str, Any], ask: Take, now: float) -> None:
    lanes = {lane: n for lane, n in ask.waiting.items() if n > 0}
    if lanes and ask.waiting_until > now:
        state["waiting"][ask.holder] = {"until": ask.waiting_until, "lanes": lanes}
    else:
        state["waiting"].pop(ask.holder, None)


def _reserve(
    state: dict[str, Any], lane: str, lanes: Mapping[str, LaneRank], rpm: int, now: float
) -> int:
    """Requests `lane` must leave for others: higher lanes' waiting jobs, and the
    guarantees of waiting lanes still below their share."""
    used: dict[str, int] = {}
    for b in state["buckets"]:
        for name, n in b[3].items():
            used[name] = used.get(name, 0) + n
    waiting: dict[str, int] = {}
    for entry in state["waiting"].values():
        for name, n in entry["lanes"].items():
            waiting[name] = waiting.get(name, 0) + n
    mine = lanes.get(lane, LaneRank(0))
    if used.get(lane, 0) < math.floor(mine.min_share * rpm):
        return 0  # within its guaranteed share: it goes first
    reserve = 0
    for name, count in waiting.items():
        if name == lane:
            continue
        other = lanes.get(name, LaneRank(0))
        guaranteed = math.floor(other.min_share * rpm)
        if used.get(name, 0) < guaranteed:
            reserve += min(count, guaranteed - used.get(name, 0))
        elif other.priority > mine.priority:
            reserve += count
    return reserve


def _add(state: dict[str, Any], bucket: int, lane: str, requests: int, tokens: int) -> None:
    for b in state["buckets"]:
        if b[0] == bucket:
            b[1] += requests
            b[2] += tokens
            b[3][lane] = b[3].get(lane, 0) + requests
            return
    state["buckets"].append([bucket, requests, tokens, {lane: requests}])
    state["buckets"].sort(key=lambda b: b[0])


def _retry_after(
    buckets: list[list[Any]], recent: list[list[Any]], limits: PoolLimits, now: float
) -> float:
    """Seconds until the oldest grant leaves the pacing part (or the window): a hint."""
    width = limits.bucket_s
    shift = limits.part_s - limits.counted_s
    candidates = [(b[0] + 1) * width + shift - now for b in recent if b[1] > 0]
    candidates += [(b[0] + 1) * width + limits.window_s - now for b in buckets[:1]]
    positive = [c for c in candidates if c > 0]
    return max(width, min(positive) if positive else width)
