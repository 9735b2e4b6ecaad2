"""In-memory fakes of the ports that record what happened (for unit tests)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from shared.domain.errors import DependencyUnavailable
from shared.domain.events import AssignmentGraded, GradePosted, GradeReviewed, GradingCompleted
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest
from shared.ports import TaskSpec


@dataclass
class FakeTaskQueue:
    """Records tasks; refuses a second task of the same name like Cloud Tasks."""

    tasks: list[TaskSpec] = field(default_factory=list)
    available: bool = True
    #: Names of tasks the queue no longer holds (delivered, or deleted when retries ran out).
    gone: set[str] = field(default_factory=set)
    #: The task names `exists` was asked about, in order.
    asked: list[str] = field(default_factory=list)
    #: The paused lanes, and the lanes purged (in order).
    paused: set[str | None] = field(default_factory=set)
    purged: list[str | None] = field(default_factory=list)

    def enqueue(self, task: TaskSpec) -> bool:
        if not self.available:
            raise DependencyUnavailable("queue down")
        if any(t.name == task.name and t.queue == task.queue for t in self.tasks):
            return False
        self.tasks.append(task)
        return True

    def exists(self, task_name: str, queue: str | None = None) -> bool:
        self.asked.append(task_name)
        if not self.available:
            raise DependencyUnavailable("queue down")
        return task_name not in self.gone and any(
            t.name == task_name and t.queue == queue for t in self.tasks
        )

    def pause(self, queue: str | None) -> None:
        self.paused.add(queue)

    def resume(self, queue: str | None) -> None:
        self.paused.discard(queue)

    def purge(self, queue: str | None) -> None:
        self.purged.append(queue)
        self.gone.update(t.name for t in self.tasks if t.queue == queue)

    def is_paused(self, queue: str | None) -> bool:
        if not self.available:  # both real queues answer from the service
            raise DependencyUnavailable("queue down")
        return queue in self.paused

    def finish_all(self) -> None:
        """Let every task leave the queue, as after its last attempt."""
        self.gone.update(t.name for t in self.tasks)

    def ping(self) -> None:
        if not self.available:
            raise DependencyUnavailable("queue down")


@dataclass
class FakePublisher:
    """Records published events; can be made to fail."""

    events: list[GradingCompleted | AssignmentGraded | GradeReviewed | GradePosted] = field(
        default_factory=list
    )
    failures: int = 0

    def publish(
        self, event: GradingCompleted | AssignmentGraded | GradeReviewed | GradePosted
    ) -> str:
        if self.failures > 0:
            self.failures -= 1
            raise DependencyUnavailable("bus down")
        self.events.append(event)
        return f"m{len(self.events)}"

    def ping(self) -> None:
        return None

    def completions(self) -> list[GradingCompleted]:
        """The events published, each checked to be a job's `GradingCompleted`."""
        completed = [e for e in self.events if isinstance(e, GradingCompleted)]
        assert completed == self.events, f"not only GradingCompleted events: {self.events}"
        return completed


@dataclass
class FakeProcessedEvents:
    seen: dict[tuple[str, str], dict[str, object]] = field(default_factory=dict)

    def add(self, subscriber: str, event_id: str, record: dict[str, object]) -> bool:
        if (subscriber, event_id) in self.seen:
            return False
        self.seen[(subscriber, event_id)] = record
        return True

    def contains(self, subscriber: str, event_id: str) -> bool:
        return (subscriber, event_id) in self.seen


@dataclass(frozen=True)
class GraderCall:
    """What one grader call received."""

    request: GradingRequest
    attempt: int
    timeout_s: float


class ScriptedGrader:
    """Raises the scripted errors in order, then grades with a fixed score.

    Records what each call received. With a `gate`, each call waits until the gate is
    set (`started` is set first), so a test decides when the grading ends.
    """

    name = "scripted"

    def __init__(
        self, *errors: Exception, score: float = 7.0, gate: threading.Event | None = None
    ) -> None:
        self._errors = list(errors)
        self._score = score
        self._lock = threading.Lock()
        self.gate = gate
        self.started = threading.Event()
        self.received: list[GraderCall] = []
        #: The thread each call ran on.
        self.threads: list[threading.Thread] = []

    @property
    def calls(self) -> int:
        return len(self.received)

    @property
    def attempts(self) -> list[int]:
        """The attempt number each call received, in order."""
        return [call.attempt for call in self.received]

    def grade(self, request: GradingRequest, *, attempt: int, timeout_s: float) -> GradeResult:
        with self._lock:
            self.received.append(GraderCall(request, attempt, timeout_s))
            self.threads.append(threading.current_thread())
            error = self._errors.pop(0) if self._errors else None
        self.started.set()
        if self.gate is not None and not self.gate.wait(30):
            raise AssertionError("the grader's gate was never opened")
        if error is not None:
            raise error
        return GradeResult(self._score, request.max_score, "scripted feedback", grader=self.name)
