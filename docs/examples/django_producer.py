"""A Django producer: a view that enqueues through the process's one SyncBus.

Route it in ``urls.py`` (``path("reports", views.request_report)``) and set ``REDIS_URL`` in the
settings; a worker of the same tag runs the jobs. Type-checked and linted with the project, not run:
Django is not one of its dependencies (``tests/docs/test_fastapi_recipe.py`` runs the same flow).
"""

from django.conf import settings
from django.http import HttpRequest, JsonResponse

from echomq import Admission, InvalidInput, RedisUnavailable, SyncBus, ids

# one SyncBus per process, made at import and shared by the server's threads: size its pool for them
bus = SyncBus.from_url(settings.REDIS_URL, tag="app", max_connections=32)


def request_report(request: HttpRequest) -> JsonResponse:
    """Admit a report job under the client's Idempotency-Key (a JOB id), or a fresh id: 202."""
    if request.method != "POST":
        return JsonResponse({"error": "POST only"}, status=405)
    job = request.headers.get("Idempotency-Key") or ids.mint("JOB")  # a client's retry reuses its key
    try:
        admission = bus.enqueue(job, lane="reports", payload=request.body)
    except InvalidInput as exc:  # a bad key or payload: nothing was sent
        return JsonResponse({"error": str(exc)}, status=400)
    except RedisUnavailable:  # it may have run: the client sends the same request again
        return JsonResponse({"error": "queue unavailable; send the same request again"}, status=503)
    if admission is Admission.CONFLICT:  # that key was used for another request
        return JsonResponse({"error": "Idempotency-Key reused for another request"}, status=409)
    return JsonResponse({"job": job, "admission": admission.value}, status=202)  # queued once
