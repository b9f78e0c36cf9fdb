"""Every exception the project raises, named by cause.

Callers choose to retry, acknowledge or give up by type:

- ``RetryableError`` subclasses: a transient fault (throttling, a dependency down); the caller may try again.
- ``BadInputError`` subclasses: malformed, foreign or late input; acknowledged and counted, never retried.
- ``ConflictError`` subclasses: a conditional write lost a race; they carry the record that won.

Each is raised ``from`` the underlying AWS SDK or Kubernetes client error where there is one.
"""

from __future__ import annotations

from typing import Any


class NodeManagerError(Exception):
    """Root of the project's exceptions."""


class SettingsError(NodeManagerError):
    """A setting (environment variable or CDK context value) is missing or invalid.

    Attributes:
        name: the setting's name, e.g. ``CLUSTER_NAME``.
    """

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"setting {name}: {message}")
        self.name = name


class BadInputError(NodeManagerError):
    """Input that must be acknowledged and counted, never retried."""

    reason: str = "bad_input"


class MalformedEventError(BadInputError):
    """An event or message that does not have the documented shape."""

    reason = "malformed"


class EventTimeInFutureError(MalformedEventError):
    """An event stamped later than now plus the allowed clock skew: acting on it would set deadlines, backoff
    windows or hold periods in the future (a drain that never times out, an ASG never trusted again).

    Attributes:
        event_time: the event's time (UTC).
    """

    reason = "time_in_future"

    def __init__(self, message: str, event_time: object = None) -> None:
        super().__init__(message)
        self.event_time = event_time


class RetryableError(NodeManagerError):
    """A transient fault; the operation may be tried again."""


class StoreUnavailableError(RetryableError):
    """DynamoDB could not be reached or throttled the request."""


class ConflictError(NodeManagerError):
    """A conditional write lost to another writer.

    Attributes:
        current: the item as it is now (None when it does not exist).
    """

    def __init__(self, message: str, current: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.current = current


class LockHeldError(ConflictError):
    """The cluster lock is held by another holder whose lease has not expired."""

    @property
    def holder(self) -> str | None:
        return None if self.current is None else self.current.get("holder")


class LockLostError(ConflictError):
    """This holder's lease was taken over (expired and acquired by another, with a higher fencing value)."""


class CommandTransitionError(ConflictError):
    """A command's status could not move as asked (another worker owns it, or it is already terminal)."""


class CommandExistsError(ConflictError):
    """A command with this id was already recorded (a duplicate event)."""


class LedgerConflictError(ConflictError):
    """A ``COMP#`` ledger item changed since it was read (its ``version`` moved on); ``current`` holds it."""


class NodeNotFoundError(NodeManagerError):
    """No Kubernetes node carries the instance's providerID.

    Attributes:
        instance_id: the EC2 instance id looked for.
    """

    def __init__(self, instance_id: str) -> None:
        super().__init__(f"no node has providerID for instance {instance_id}")
        self.instance_id = instance_id


class ControlPlaneRefusedError(NodeManagerError):
    """A drain or cordon of a control-plane node the agent does not do for this command (``agent.drain.guard``):
    final, the node untouched. ``why`` says which rule refused it."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class ControlPlaneBusyError(RetryableError):
    """A control-plane drain that must wait: the cluster's control-plane drain slots (``MAX_CONTROL_PLANE_DRAINS``)
    are all held by other commands (``holders``: their command ids). The command is handed back, its node untouched.
    """

    def __init__(self, why: str, holders: list[str] | None = None) -> None:
        super().__init__(why)
        self.holders = holders or []


class KubernetesApiError(RetryableError):
    """The Kubernetes API answered with an error that is worth retrying (5xx, connection)."""


class WatchExpiredError(NodeManagerError):
    """A Kubernetes watch's resourceVersion is too old (HTTP 410 Gone); the caller must list again."""


class UnsupportedEventError(MalformedEventError):
    """A well-formed event of a (source, detail-type) this handler does not handle (a rule matched too much)."""

    reason = "unsupported_event"


class AwsUnavailableError(RetryableError):
    """An AWS API (EC2, Auto Scaling, SQS) throttled the request or failed on its side (5xx, connection).

    Attributes:
        operation: the API operation, e.g. ``DetachInstances``.
        code: the AWS error code (``Throttling``, ``RequestLimitExceeded``, ...) or the connection error's name.
    """

    def __init__(self, operation: str, code: str, message: str = "") -> None:
        super().__init__(f"{operation}: {code} {message}".rstrip())
        self.operation = operation
        self.code = code


class AwsRequestError(NodeManagerError):
    """An AWS API refused the request for a reason that retrying will not fix (access denied, validation).

    Attributes:
        operation: the API operation, e.g. ``DetachInstances``.
        code: the AWS error code, e.g. ``AccessDenied``.
    """

    def __init__(self, operation: str, code: str, message: str = "") -> None:
        super().__init__(f"{operation}: {code} {message}".rstrip())
        self.operation = operation
        self.code = code


class KubernetesRejectedError(NodeManagerError):
    """The Kubernetes API refused a request for good (a 4xx other than 404/409/429: 403 when the agent's
    ClusterRole lacks a verb, 400 or 422 for a malformed request). Retrying the same request will not help.

    Attributes:
        status: the HTTP status code.
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class KubernetesNotFoundError(KubernetesRejectedError):
    """The Kubernetes object named in the request does not exist (HTTP 404)."""

    def __init__(self, message: str) -> None:
        super().__init__(404, message)


class KubernetesConflictError(KubernetesRejectedError):
    """A Kubernetes write lost a race (HTTP 409): a resourceVersion or uid precondition failed, or the object
    already exists. Read the object again and decide again."""

    def __init__(self, message: str) -> None:
        super().__init__(409, message)


class KubernetesTooManyRequestsError(KubernetesApiError):
    """The Kubernetes API asked the client to slow down (HTTP 429: API priority and fairness, or a
    PodDisruptionBudget outside of evictions). Retryable.

    Attributes:
        retry_after: seconds the apiserver asked to wait (``Retry-After`` header, else the Status'
            ``details.retryAfterSeconds``); None when it named none.
    """

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RunConflictError(ConflictError):
    """A ``RUN#`` item changed since it was read (another invocation advanced the run first): read it again."""


class RunRecordRefusedError(NodeManagerError):
    """A ``RUN#`` item was not written for a reason no retry fixes: it would be over the size guard
    (``code`` ``ItemTooLarge``, refused before the call: ``adapters.dynamo.runs``), or DynamoDB refused it as invalid
    (``ValidationException``; in a transaction a ``ValidationError`` cancellation reason), e.g. over its 400 KB item
    size ("DynamoDB item sizes and formats"). Nothing was written.

    Attributes:
        run_id: the run's id.
        code: ``ItemTooLarge`` or DynamoDB's error code.
        size: the item's size in bytes as ``core.itemsize`` counts it (None when not counted).
        limit: the guard it was held to, in bytes (None for DynamoDB's own refusal).
    """

    def __init__(self, run_id: str, code: str, message: str, size: int | None = None, limit: int | None = None) -> None:
        super().__init__(f"run {run_id}: {code}: {message}")
        self.run_id = run_id
        self.code = code
        self.size = size
        self.limit = limit


class RunAlreadyActiveError(Exception):
    """A refresh start found, once it held the cluster lock, a run another invocation started since its first read
    (at most one run is active: the check that matters is the one made under the lock).

    Attributes:
        run_id: the active run's id.
    """

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id} is already active")
        self.run_id = run_id


class InvalidRequestError(BadInputError):
    """A manual refresher request (``aws lambda invoke`` payload, CLI) that does not validate.

    Attributes:
        errors: one line per problem, ``field: message``.
    """

    reason = "invalid_request"

    def __init__(self, message: str, errors: list[str] | None = None) -> None:
        super().__init__(message)
        self.errors = errors or []
