"""kiln's exceptions: one class per absl status code kiln returns.

Every error kiln reports reaches Python as an instance of `kiln.Error` (a RuntimeError)
whose message is kiln's own (it names the ONNX node, op and opset, or the plan's bucket,
step and kernel, or the input); the subclass says what kind of error it is, and `code`
holds the status code's name. Where a standard exception means the same thing, the class
derives from it too, so `except ValueError` and `except FileNotFoundError` also work.
"""


class Error(RuntimeError):
    """Base class of every error kiln raises; `code` is the status code name."""

    code = "UNKNOWN"


class InvalidArgument(Error, ValueError):
    """Bad input: a malformed model or plan, a wrong dtype/shape, an unknown option."""

    code = "INVALID_ARGUMENT"


class NotFound(Error, FileNotFoundError):
    """A file (model, external data, plan) does not exist."""

    code = "NOT_FOUND"


class Unsupported(Error):
    """Valid input that kiln does not handle yet (an op, opset or dtype)."""

    code = "UNIMPLEMENTED"


class FailedPrecondition(Error):
    """The operation cannot run in this state: a closed session, a plan for another target."""

    code = "FAILED_PRECONDITION"


class DataLoss(Error):
    """A damaged file: a plan whose checksum does not match, truncated external data."""

    code = "DATA_LOSS"


class PermissionDenied(Error, PermissionError):
    """A path kiln refuses to open: external data outside the model's folder, ..."""

    code = "PERMISSION_DENIED"


class ResourceExhausted(Error):
    """Memory (host or device) ran out."""

    code = "RESOURCE_EXHAUSTED"


class AccuracyError(Error):
    """A plan below fp32 failed its accuracy gate (compile(accept=...)): nothing was written."""

    code = "ABORTED"


class Internal(Error):
    """A kiln bug: please report it with the message."""

    code = "INTERNAL"


_BY_CODE = {cls.code: cls for cls in (InvalidArgument, NotFound, Unsupported,
                                      FailedPrecondition, DataLoss, PermissionDenied,
                                      ResourceExhausted, AccuracyError, Internal)}


def error_class(code):
    """The exception class for status code name `code` (kiln.Error for codes without one)."""
    return _BY_CODE.get(code, Error)
