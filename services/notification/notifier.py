"""Handle one GradingCompleted or GradePosted for the notification subscriber: webhook once,
then record."""

from __future__ import annotations

import logging
from enum import StrEnum

from services.notification.client_secrets import ClientSecrets
from services.notification.webhook import WebhookSender
from shared.domain.events import GradePosted, GradingCompleted
from shared.http.callback_guard import CallbackRefused
from shared.ports import JobStore, ProcessedEvents

SUBSCRIBER = "notification"
log = logging.getLogger(__name__)


class Handled(StrEnum):
    """What handling an event amounted to."""

    DUPLICATE = "duplicate"
    DELIVERED = "delivered"
    NO_CALLBACK = "no-callback"
    REFUSED = "refused"
    UNSIGNABLE = "unsignable"
    GONE = "gone"
    PRACTICE = "practice"


_MESSAGES = {
    Handled.DELIVERED: "event notified",
    Handled.REFUSED: "event recorded without a webhook",
    Handled.UNSIGNABLE: "event recorded without a webhook: the client has no webhook secret",
    Handled.NO_CALLBACK: "event has no callback_url",
    Handled.PRACTICE: "event of a practice job: no webhook",
}


class Notifier:
    """Deliver each event's webhook, and record it only after the client accepted it.

    The callback URL is read from the job, not the event: it may carry the client's token,
    and the event also goes to analytics. The subscription's filter pushes only the events
    of jobs with one (the `has_callback` attribute); an event without still arriving (the
    Pub/Sub emulator does not apply filters) is recorded without a webhook. The webhook is
    signed with the secrets of the job's client; a client without one gets no webhook
    (recorded, never signed otherwise). An event whose job is gone (erased) is dropped:
    no webhook and no record, so nothing here names the job again.
    """

    def __init__(
        self,
        processed: ProcessedEvents,
        jobs: JobStore,
        secrets: ClientSecrets,
        sender: WebhookSender,
    ) -> None:
        self._processed = processed
        self._jobs = jobs
        self._secrets = secrets
        self._sender = sender

    def handle(self, event: GradingCompleted | GradePosted) -> Handled:
        """Raise CallbackFailed (nothing recorded) when the client did not take it.

        A GradePosted is one version of a posted grade (the first post, a teacher's change
        after it): each version is its own event id, so each reaches the callback once.
        """
        if self._processed.contains(SUBSCRIBER, event.event_id):
            log.info("event already notified", extra={"event_id": event.event_id})
            return Handled.DUPLICATE
        job = self._jobs.get(event.job_id)
        if job is None:
            log.warning(
                "the event's job is gone (erased); dropped", extra={"event_id": event.event_id}
            )
            return Handled.GONE
        record: dict[str, object] = {"job_id": event.job_id, **_facts(event)}
        callback_url = job.request.callback_url
        handled = Handled.NO_CALLBACK
        practice = isinstance(event, GradingCompleted) and event.practice
        if practice or job.request.practice:
            # A student's practice job is never the school's: nothing is signed for it.
            handled, callback_url = Handled.PRACTICE, None
        if callback_url:
            # Signed for the school the job belongs to, whoever in it submitted the job.
            secrets = self._secrets.signing_secrets(job.client_id)
            if not secrets:
                record["callback_refused"] = "the client has no webhook secret"
                handled = Handled.UNSIGNABLE
            else:
                try:
                    record["callback_status"] = self._sender.send(event, callback_url, secrets)
                    handled = Handled.DELIVERED
                except CallbackRefused as exc:
                    # Redelivery cannot make the address public: record the refusal, ack.
                    log.warning("callback refused", extra={"reason": exc.detail})
                    record["callback_refused"] = exc.detail
                    handled = Handled.REFUSED
        # Two concurrent deliveries may both send; the client dedupes on webhook-id.
        self._processed.add(SUBSCRIBER, event.event_id, record)
        level = logging.WARNING if handled is Handled.UNSIGNABLE else logging.INFO
        log.log(
            level,
            _MESSAGES[handled],
            extra={"event_id": event.event_id, **_facts(event)},
        )
        return handled


def _facts(event: GradingCompleted | GradePosted) -> dict[str, object]:
    """What the record and log line say of the event besides its ids."""
    if isinstance(event, GradePosted):
        return {"type": "grade.posted", "version": event.version}
    return {"outcome": event.outcome.value}
