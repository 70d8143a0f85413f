"""Request validation errors that can always be sent: FastAPI echoes each rejected value in its 422
reply, and a JSON string holding a lone surrogate ("\\ud800", which pydantic refuses as not Unicode)
cannot be encoded as UTF-8, so the default handler itself fails with a 500. Here such a request is
a 400 naming the field, and every echoed value is made encodable first."""
from __future__ import annotations

from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse


def _encodable(x):
    if isinstance(x, str):
        return x.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(x, dict):
        return {_encodable(k): _encodable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_encodable(v) for v in x]
    return x


def validation_reply(exc: RequestValidationError) -> JSONResponse:
    """The reply to a request FastAPI's validation refused: 400 for text that is not Unicode, else 422."""
    errors = _encodable(jsonable_encoder(exc.errors()))
    bad = [e for e in errors if e.get("type") == "string_unicode"]
    if bad:
        where = ".".join(str(p) for p in bad[0].get("loc", ()))
        return JSONResponse({"detail": f"{where} is not valid Unicode text (it holds a lone surrogate, "
                                       "such as the JSON escape \\ud800 without its pair)"}, status_code=400)
    return JSONResponse({"detail": errors}, status_code=422)
