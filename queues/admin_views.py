"""The web admin's dashboard pages (SPEC §7), in the manner of django-rq:
staff-only function views that build their context explicitly; a destructive
action shows a confirmation page on GET and acts on POST, then leaves a
message and redirects.

Redis is read through inspect.py and changed through engine.py only. Each
section of a page reads on its own (`read_or_error`), so an unreachable pool
or a corrupt entry shows as "unreadable" in that section, never as a 500.
URL map: queues/admin_urls.py.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone as dt_timezone
from urllib.parse import urlencode

import redis
from django.contrib import admin, messages
from django.contrib.admin.views.decorators import staff_member_required
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from queues import admin_charts, inspect, names, pools, throttling, tokens, ulid
from queues.admin_forms import (AttemptFilterForm, DeadSelectionForm, ExpressionTesterForm, TokenCreateForm,
                                TokenLimitForm, TopicForm)
from queues.engine import Engine, JobState
from queues.expressions import check as check_expression
from queues.models import AlertEvent, Namespace, Schedule, Token, TokenLimit, Topic
from queues.notifier import send_test_delivery

OVERVIEW_PAGE_SIZE = 100
NAMESPACE_PAGE_SIZE = 100
TOPIC_PAGE_SIZE = 50
DEAD_PAGE_SIZE = 25
PEEK_DEFAULT, PEEK_MAX = 10, 100
PREVIEW_CHARS = 160
ALERTS_SHOWN = 20
REVOKED_TOKENS_SHOWN = 20
ATTEMPTS_SHOWN = 50
SUMMARY_ATTEMPTS = 200
# (label, bucket seconds, buckets) of the queue page's due-time charts.
DUE_CHARTS = (("Next 24 hours (30-minute buckets)", 1800, 48), ("Next 72 hours (hourly buckets)", 3600, 72))
# The session remembers only *which* token to show once, never its value: the
# value is derived again from the stored derivation (tokens.plain_value).
SHOW_TOKEN_SESSION_KEY = "queues_admin_show_token"
READ_ERRORS = (redis.RedisError, *inspect.UNREADABLE_ERRORS)


# -- plumbing ------------------------------------------------------------------------------
def staff_page(view):
    """Staff only (anonymous and non-staff users go to the login page), never
    cached: pages show live counts and, once, a token."""
    return staff_member_required(never_cache(view))


def page_context(request: HttpRequest, title: str, nav: str = "overview", **values) -> dict:
    """The Django admin's own context (site header, user links) plus the page's."""
    return {**admin.site.each_context(request), "title": title, "nav": nav, **values}


def read_or_error(read, *args, **kwargs) -> tuple[object, str]:
    """One section's read: its value, or None and the error to show instead."""
    try:
        return read(*args, **kwargs), ""
    except READ_ERRORS as exc:
        return None, f"unreadable: {exc}"


def bounded_int(value: str | None, default: int, low: int, high: int) -> int:
    try:
        return min(max(int(value), low), high) if value is not None else default
    except ValueError:
        return default


def from_ms(ms: int | None) -> datetime | None:
    return datetime.fromtimestamp(ms / 1000, tz=dt_timezone.utc) if ms else None


def check_namespace_name(ns: str) -> None:
    if len(ns) > names.MAX_NAME_LENGTH or names.namespace_error(ns):
        raise Http404("no such namespace")


def namespace_url(ns: str) -> str:
    return reverse("queues_admin:namespace", args=[ns])


@dataclass(frozen=True)
class QueueRef:
    """A queue the page is about: its pool (`?pool=`, default "default") and names."""

    pool: str
    namespace: str
    queue: str

    @classmethod
    def from_request(cls, request: HttpRequest, ns: str, queue: str) -> QueueRef:
        if names.names_error(ns, queue):
            raise Http404("no such queue")
        pool = request.GET.get("pool") or request.POST.get("pool") or pools.DEFAULT_POOL
        if pool not in pools.pool_names():
            raise Http404("no such pool")
        return cls(pool, ns, queue)

    @property
    def name(self) -> str:
        return f"{self.namespace}/{self.queue}"

    @property
    def engine(self) -> Engine:
        return Engine(self.pool)

    @property
    def pool_query(self) -> dict[str, str]:
        """What a GET form must carry as hidden fields to stay in this pool."""
        return {} if self.pool == pools.DEFAULT_POOL else {"pool": self.pool}

    def url(self, view: str = "queue", *args: str, **query) -> str:
        path = reverse(f"queues_admin:{view}", args=[self.namespace, self.queue, *args])
        query = {**self.pool_query, **{k: v for k, v in query.items() if v not in (None, "")}}
        return path + ("?" + urlencode(query, doseq=True) if query else "")


def confirm_page(request: HttpRequest, *, title: str, question: str, action_url: str, cancel_url: str,
                 submit_label: str, details: list[str] | None = None, hidden: list[tuple[str, str]] | None = None,
                 form=None, danger: bool = True, breadcrumbs: list[tuple[str, str]] | None = None) -> HttpResponse:
    """The GET half of every destructive action: say what will happen, POST to do it."""
    context = page_context(request, title, question=question, action_url=action_url, cancel_url=cancel_url,
                           submit_label=submit_label, details=details or [], hidden=hidden or [], form=form,
                           danger=danger, breadcrumbs=breadcrumbs or [])
    return render(request, "queues/confirm.html", context)


# -- overview ------------------------------------------------------------------------------
@staff_page
def overview(request: HttpRequest) -> HttpResponse:
    """Every queue (paginated; counts and rates read for the current page only),
    every namespace, pool health and firing alerts."""
    name_filter = request.GET.get("filter", "").strip()
    registered, pool_errors = all_registered_queues()
    shown = [entry for entry in registered if name_filter in f"{entry[1]}/{entry[2]}"] if name_filter else registered
    page = Paginator(shown, OVERVIEW_PAGE_SIZE).get_page(request.GET.get("page"))
    namespaces = Paginator(namespace_lines(registered), NAMESPACE_PAGE_SIZE).get_page(request.GET.get("ns_page"))
    firing = AlertEvent.objects.filter(resolved_at__isnull=True)
    context = page_context(
        request, "Queues",
        page=page, queue_lines=queue_lines(list(page.object_list)), queue_count=len(registered),
        shown_count=len(shown), name_filter=name_filter, pool_errors=pool_errors,
        namespaces=namespaces, health=[inspect.pool_health(pool) for pool in pools.pool_names()],
        alerts=list(firing.select_related("rule")[:ALERTS_SHOWN]), alert_count=firing.count(),
        alert_admin_url=reverse("admin:queues_alertevent_changelist"),
        model_links=admin.site.get_app_list(request, app_label="queues"),
        topics_url=reverse("queues_admin:topics"))
    return render(request, "queues/overview.html", context)


def all_registered_queues() -> tuple[list[tuple[str, str, str]], list[str]]:
    """(pool, namespace, queue) of every registered queue, and the pools that could not be read."""
    found: list[tuple[str, str, str]] = []
    errors = []
    for pool in pools.pool_names():
        members, error = read_or_error(inspect.queue_members, pool)
        if error:
            errors.append(f"pool {pool}: {error}")
            continue
        found += [(pool, ns, q) for ns, q in members]
    return found, errors


def queue_lines(entries: list[tuple[str, str, str]]) -> list[dict]:
    """Counts and rates of the listed queues: one pipeline per pool."""
    by_pool: dict[str, list[tuple[str, str]]] = {}
    for pool, ns, q in entries:
        by_pool.setdefault(pool, []).append((ns, q))
    rows: dict[tuple[str, str, str], inspect.QueueRow] = {}
    for pool, queues in by_pool.items():
        read, _ = read_or_error(inspect.queue_rows, pool, queues)
        for ns, q in queues:
            rows[(pool, ns, q)] = None
        for row in read or []:
            rows[(pool, row.namespace, row.queue)] = row
    return [queue_line(pool, ns, q, rows[(pool, ns, q)]) for pool, ns, q in entries]


def queue_line(pool: str, ns: str, q: str, row: inspect.QueueRow | None) -> dict:
    linkable = names.names_error(ns, q) is None
    return {"pool": pool, "namespace": ns, "queue": q, "row": row,
            "unreadable": row is None or row.unreadable,
            "url": QueueRef(pool, ns, q).url() if linkable else "",
            "namespace_url": namespace_url(ns) if linkable else ""}


def namespace_lines(registered: list[tuple[str, str, str]]) -> list[dict]:
    """Namespaces of the database and of Redis, with their queue, token and topic counts."""
    queue_counts: dict[str, int] = {}
    for _, ns, _ in registered:
        queue_counts[ns] = queue_counts.get(ns, 0) + 1
    in_db = {n.name: n for n in Namespace.objects.annotate(
        active_tokens=Count("tokens", filter=Q(tokens__revoked_at__isnull=True), distinct=True),
        topic_count=Count("topics", distinct=True))}
    lines = []
    for name in sorted(set(in_db) | set(queue_counts)):
        found = in_db.get(name)
        lines.append({"name": name, "queues": queue_counts.get(name, 0),
                      "tokens": found.active_tokens if found else 0, "topics": found.topic_count if found else 0,
                      "description": found.description if found else "", "in_database": found is not None,
                      "url": namespace_url(name) if names.namespace_error(name) is None else ""})
    return lines


# -- namespace and tokens ------------------------------------------------------------------
@staff_page
def namespace_page(request: HttpRequest, ns: str) -> HttpResponse:
    check_namespace_name(ns)
    namespace = Namespace.objects.filter(name=ns).first()
    registered, pool_errors = all_registered_queues()
    own_queues = [entry for entry in registered if entry[1] == ns]
    if namespace is None and not own_queues:
        raise Http404("no such namespace")
    page = Paginator(own_queues, NAMESPACE_PAGE_SIZE).get_page(request.GET.get("page"))
    all_tokens = Token.objects.filter(namespace=namespace).select_related("limit", "created_by") if namespace else []
    context = page_context(
        request, f"Namespace {ns}",
        namespace=namespace, ns=ns, page=page, queue_lines=queue_lines(list(page.object_list)),
        pool_errors=pool_errors,
        active_tokens=[token_line(ns, t) for t in all_tokens if t.revoked_at is None],
        revoked_tokens=[token_line(ns, t) for t in
                        sorted((t for t in all_tokens if t.revoked_at), key=lambda t: t.revoked_at,
                               reverse=True)[:REVOKED_TOKENS_SHOWN]],
        token_form=TokenCreateForm(), token_create_url=reverse("queues_admin:token_create", args=[ns]),
        topics=[topic_line(t) for t in Topic.objects.filter(namespace__name=ns).select_related("namespace")],
        new_topic_url=reverse("queues_admin:topic_new") + "?" + urlencode({"ns": ns}),
        schedules=list(Schedule.objects.filter(namespace__name=ns)),
        multiple_pools=len(pools.pool_names()) > 1)
    return render(request, "queues/namespace.html", context)


def token_line(ns: str, token: Token) -> dict:
    listed = token.prefix + "…"
    try:
        limit = token.limit
    except TokenLimit.DoesNotExist:
        limit = None
    return {"token": token, "listed": listed if token.pool == pools.DEFAULT_POOL else f"{token.pool}:{listed}",
            "limit": limit, "revoke_url": reverse("queues_admin:token_revoke", args=[ns, token.id]),
            "limit_url": reverse("queues_admin:token_limit", args=[ns, token.id])}


def topic_line(topic: Topic) -> dict:
    ref = QueueRef(topic.pool, topic.namespace.name, topic.queue)
    return {"topic": topic, "url": reverse("queues_admin:topic", args=[topic.id]), "queue_url": ref.url()}


@never_cache
@staff_member_required
@require_POST
def token_create(request: HttpRequest, ns: str) -> HttpResponse:
    """Create a token, then redirect to the page that shows it once (so a reload
    neither creates another token nor shows this one again)."""
    check_namespace_name(ns)
    form = TokenCreateForm(request.POST)
    if not form.is_valid():
        for field, errors in form.errors.items():
            messages.error(request, f"Token not created: {field}: {' '.join(errors)}")
        return redirect(namespace_url(ns))
    token, _plain = tokens.create_token(ns, form.cleaned_data["description"], form.cleaned_data["pool"],
                                        created_by=request.user)
    request.session[SHOW_TOKEN_SESSION_KEY] = token.id
    return redirect("queues_admin:token_created", ns, token.id)


@staff_page
def token_created(request: HttpRequest, ns: str, token_id: int) -> HttpResponse:
    token = get_object_or_404(Token.objects.select_related("namespace"), id=token_id, namespace__name=ns)
    show_now = request.session.pop(SHOW_TOKEN_SESSION_KEY, None) == token.id
    plain = tokens.plain_value(token) if show_now else None
    if plain is not None and token.pool != pools.DEFAULT_POOL:
        plain = f"{token.pool}:{plain}"
    context = page_context(request, "Token created" if plain else "Token", token=token, plain=plain, ns=ns,
                           namespace_url=namespace_url(ns))
    return render(request, "queues/token_created.html", context)


@staff_page
@require_http_methods(["GET", "POST"])
def token_revoke(request: HttpRequest, ns: str, token_id: int) -> HttpResponse:
    token = get_object_or_404(Token.objects.active(), id=token_id, namespace__name=ns)
    line = token_line(ns, token)
    if request.method == "POST":
        tokens.revoke([token.id])
        messages.success(request, f"Revoked token {line['listed']} ({token.description}).")
        return redirect(namespace_url(ns))
    return confirm_page(
        request, title="Revoke token", question=f"Revoke token {line['listed']} of namespace {ns}?",
        details=[f"Description: {token.description}", f"Pool: {token.pool}",
                 "Clients using it get 401 within a second. This cannot be undone."],
        action_url=request.path, cancel_url=namespace_url(ns), submit_label="Yes, revoke",
        breadcrumbs=[(ns, namespace_url(ns))])


@staff_page
@require_http_methods(["GET", "POST"])
def token_limit(request: HttpRequest, ns: str, token_id: int) -> HttpResponse:
    token = get_object_or_404(Token.objects.active(), id=token_id, namespace__name=ns)
    existing = TokenLimit.objects.filter(token=token).first()
    form = TokenLimitForm(request.POST or None, instance=existing or TokenLimit(token=token))
    if request.method == "POST" and form.is_valid():
        form.save()
        throttling.limits.reload()
        messages.success(request, f"Rate limit of token {token_line(ns, token)['listed']} saved.")
        return redirect(namespace_url(ns))
    context = page_context(request, "Token rate limit", token=token, line=token_line(ns, token), form=form,
                           existing=existing, ns=ns, namespace_url=namespace_url(ns),
                           remove_url=reverse("queues_admin:token_limit_remove", args=[ns, token.id]))
    return render(request, "queues/token_limit.html", context)


@staff_page
@require_http_methods(["GET", "POST"])
def token_limit_remove(request: HttpRequest, ns: str, token_id: int) -> HttpResponse:
    limit = get_object_or_404(TokenLimit, token_id=token_id, token__namespace__name=ns)
    listed = token_line(ns, limit.token)["listed"]
    if request.method == "POST":
        limit.delete()
        throttling.limits.reload()
        messages.success(request, f"Token {listed} is no longer rate limited.")
        return redirect(namespace_url(ns))
    return confirm_page(
        request, title="Remove rate limit", question=f"Remove the rate limit of token {listed}?",
        details=[f"Now: {limit.read} reads and {limit.write} writes per {limit.interval} s."],
        action_url=request.path, cancel_url=namespace_url(ns), submit_label="Yes, remove the limit",
        breadcrumbs=[(ns, namespace_url(ns))])


# -- queue -----------------------------------------------------------------------------------
@staff_page
def queue_page(request: HttpRequest, ns: str, queue: str) -> HttpResponse:
    ref = QueueRef.from_request(request, ns, queue)
    rows, stats_error = read_or_error(inspect.queue_rows, ref.pool, [(ns, queue)])
    pause, pause_error = read_or_error(inspect.pause_state, ref.pool, ns, queue)
    peek_count = bounded_int(request.GET.get("peek"), PEEK_DEFAULT, 1, PEEK_MAX)
    ready, ready_error = read_or_error(inspect.ready_rows, ref.pool, ns, queue, peek_count)
    dead = dead_section(request, ref)
    context = page_context(
        request, f"Queue {ref.name}",
        ref=ref, stats=rows[0] if rows else None, stats_error=stats_error, pause=pause, pause_error=pause_error,
        paused_at=from_ms(pause.at_ms) if pause else None,
        charts=[due_chart(ref, *chart) for chart in DUE_CHARTS],
        peek_count=peek_count, ready=[job_line(ref, row) for row in ready or []], ready_error=ready_error,
        dead=dead, topic=Topic.objects.filter(namespace__name=ns, queue=queue, pool=ref.pool).first(),
        new_topic_url=reverse("queues_admin:topic_new") + "?" + urlencode({"ns": ns, "queue": queue,
                                                                            "pool": ref.pool}),
        urls={name: ref.url(name) for name in ("pause", "resume", "destroy", "dead_respawn", "dead_delete")},
        namespace_url=namespace_url(ns), pool_hidden=list(ref.pool_query.items()))
    return render(request, "queues/queue.html", context)


def due_chart(ref: QueueRef, label: str, bucket_s: int, buckets: int) -> dict:
    answer, error = read_or_error(inspect.due_histogram, ref.pool, ref.namespace, ref.queue, bucket_s, buckets)
    if error:
        return {"label": label, "error": error, "chart": None}
    start, counts = answer
    return {"label": label, "error": "", "chart": admin_charts.build_histogram(label, start, bucket_s, counts)}


def dead_section(request: HttpRequest, ref: QueueRef) -> dict:
    """One page of the dead letter (the Paginator runs over a range: nothing is loaded to count)."""
    size, error = read_or_error(inspect.dead_size, ref.pool, ref.namespace, ref.queue)
    page = Paginator(range(size or 0), DEAD_PAGE_SIZE).get_page(request.GET.get("dead_page"))
    offset = (page.number - 1) * DEAD_PAGE_SIZE
    rows: list = []
    if size and not error:
        answer, error = read_or_error(inspect.dead_rows, ref.pool, ref.namespace, ref.queue, offset,
                                      DEAD_PAGE_SIZE)
        rows = answer[1] if answer else []
    return {"size": size or 0, "error": error, "page": page, "jobs": [job_line(ref, row) for row in rows],
            "page_urls": {"previous": ref.url(dead_page=page.previous_page_number()) if page.has_previous() else "",
                          "next": ref.url(dead_page=page.next_page_number()) if page.has_next() else ""}}


def job_line(ref: QueueRef, row: inspect.JobRow) -> dict:
    job = row.job
    published = from_ms(ulid.timestamp_ms(row.id))
    return {"id": row.id, "job": job, "error": row.error, "published": published,
            "state": JobState(job.state).name.lower() if job else "",
            "preview": body_preview(job.body) if job else "", "size": len(job.body) if job else 0,
            "url": ref.url("job", row.id),
            "respawn_url": ref.url("dead_respawn", ids=row.id), "delete_url": ref.url("dead_delete", ids=row.id)}


def body_preview(body: bytes, limit: int = PREVIEW_CHARS) -> str:
    text = body_text(body)
    return text if len(text) <= limit else text[:limit] + "…"


def body_text(body: bytes) -> str:
    """A body as text: bytes that are not UTF-8 and control characters are shown
    escaped (\\xff), never as mojibake."""
    text = body.decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() or c in "\r\n\t" else repr(c)[1:-1] for c in text)


@staff_page
def job_page(request: HttpRequest, ns: str, queue: str, job_id: str) -> HttpResponse:
    ref = QueueRef.from_request(request, ns, queue)
    row, error = read_or_error(inspect.job_row, ref.pool, ns, queue, job_id)
    if row is None and not error:
        raise Http404("no such job (acked, expired or never published)")
    line = job_line(ref, row) if row else {"id": job_id, "job": None, "error": error}
    context = page_context(request, f"Job {job_id}", ref=ref, line=line,
                           body=body_text(row.job.body) if row and row.job else "",
                           queue_url=ref.url(), namespace_url=namespace_url(ns))
    return render(request, "queues/job.html", context)


@staff_page
@require_http_methods(["GET", "POST"])
def queue_pause(request: HttpRequest, ns: str, queue: str) -> HttpResponse:
    ref = QueueRef.from_request(request, ns, queue)
    if request.method == "POST":
        ref.engine.pause(ns, queue, by=request.user.get_username())
        messages.success(request, f"Paused {ref.name}: consumers and push delivery get nothing until resumed.")
        return redirect(ref.url())
    return confirm_page(
        request, title="Pause queue", question=f"Pause {ref.name}?",
        details=["Publishing goes on; consumers get “no job available” (with X-Queue-Paused: 1) "
                 "and the notifier delivers nothing until the queue is resumed.",
                 "Delayed jobs still become ready and leases still expire."],
        action_url=ref.url("pause"), cancel_url=ref.url(), submit_label="Pause", danger=False,
        breadcrumbs=queue_breadcrumbs(ref))


@staff_page
@require_http_methods(["GET", "POST"])
def queue_resume(request: HttpRequest, ns: str, queue: str) -> HttpResponse:
    ref = QueueRef.from_request(request, ns, queue)
    if request.method == "POST":
        ref.engine.resume(ns, queue)
        messages.success(request, f"Resumed {ref.name}.")
        return redirect(ref.url())
    return confirm_page(request, title="Resume queue", question=f"Resume {ref.name}?", action_url=ref.url("resume"),
                        cancel_url=ref.url(), submit_label="Resume", danger=False,
                        breadcrumbs=queue_breadcrumbs(ref))


@staff_page
@require_http_methods(["GET", "POST"])
def queue_destroy(request: HttpRequest, ns: str, queue: str) -> HttpResponse:
    ref = QueueRef.from_request(request, ns, queue)
    if request.method == "POST":
        deleted = ref.engine.destroy(ns, queue)
        messages.success(request, f"Destroyed {ref.name}: {deleted} job(s) deleted.")
        return redirect(namespace_url(ns))
    rows, error = read_or_error(inspect.queue_rows, ref.pool, [(ns, queue)])
    stats = rows[0] if rows else None
    details = [error] if error else [
        f"{stats.ready} ready, {stats.delayed} delayed and {stats.inflight} in-flight job(s) will be deleted.",
        f"The dead letter ({stats.deadletter} job(s)) is kept, as lmstfy does."]
    return confirm_page(request, title="Destroy queue", question=f"Destroy {ref.name}? This cannot be undone.",
                        details=details, action_url=ref.url("destroy"), cancel_url=ref.url(),
                        submit_label="Yes, destroy", breadcrumbs=queue_breadcrumbs(ref))


def queue_breadcrumbs(ref: QueueRef) -> list[tuple[str, str]]:
    return [(ref.namespace, namespace_url(ref.namespace)), (ref.queue, ref.url())]


@dataclass(frozen=True)
class DeadAction:
    view: str
    verb: str        # "respawn"
    done: str        # "Respawned"
    asks_ttl: bool


RESPAWN = DeadAction("dead_respawn", "respawn", "Respawned", asks_ttl=True)
DELETE = DeadAction("dead_delete", "delete", "Deleted", asks_ttl=False)


@staff_page
@require_http_methods(["GET", "POST"])
def dead_respawn(request: HttpRequest, ns: str, queue: str) -> HttpResponse:
    return dead_action(request, QueueRef.from_request(request, ns, queue), RESPAWN)


@staff_page
@require_http_methods(["GET", "POST"])
def dead_delete(request: HttpRequest, ns: str, queue: str) -> HttpResponse:
    return dead_action(request, QueueRef.from_request(request, ns, queue), DELETE)


def dead_action(request: HttpRequest, ref: QueueRef, action: DeadAction) -> HttpResponse:
    """Respawn or delete dead jobs: one or several by id, the oldest N, or all."""
    form = DeadSelectionForm(request.POST if request.method == "POST" else request.GET)
    if not form.is_valid():
        messages.error(request, " ".join(form.non_field_errors()) or "Invalid selection of dead jobs.")
        return redirect(ref.url() + "#deadletter")
    selection = form.cleaned_data
    if request.method == "POST":
        count = perform_dead_action(ref, action, selection)
        messages.success(request, f"{action.done} {count} dead job(s) of {ref.name}.")
        return redirect(ref.url() + "#deadletter")
    size, error = read_or_error(inspect.dead_size, ref.pool, ref.namespace, ref.queue)
    hidden = [("ids", job_id) for job_id in selection["ids"]] + list(ref.pool_query.items())
    if selection["oldest"] is not None:
        hidden.append(("oldest", str(selection["oldest"])))
    if selection["all"]:
        hidden.append(("all", "on"))
    details = [error] if error else [f"The dead letter holds {size} job(s)."]
    if selection["ids"]:
        details.append("Jobs: " + ", ".join(selection["ids"]))
    if action.asks_ttl:
        details.append("Respawned jobs become ready at once with tries = 1, as lmstfy respawns them.")
    return confirm_page(
        request, title=f"{action.verb.capitalize()} dead jobs",
        question=f"{action.verb.capitalize()} {describe_selection(selection, size)} of {ref.name}?",
        details=details, hidden=hidden, form=[DeadSelectionForm()["ttl"]] if action.asks_ttl else None,
        action_url=reverse(f"queues_admin:{action.view}", args=[ref.namespace, ref.queue]),
        cancel_url=ref.url() + "#deadletter", submit_label=f"Yes, {action.verb}",
        danger=action is DELETE, breadcrumbs=queue_breadcrumbs(ref))


def describe_selection(selection: dict, size: int | None) -> str:
    if selection["all"]:
        return f"all {size} dead jobs" if size is not None else "all dead jobs"
    if selection["oldest"] is not None:
        return f"the {selection['oldest']} oldest dead job(s)"
    count = len(selection["ids"])
    return f"{count} dead job" + ("s" if count != 1 else "")


def perform_dead_action(ref: QueueRef, action: DeadAction, selection: dict) -> int:
    engine, ns, q = ref.engine, ref.namespace, ref.queue
    if selection["ids"]:
        if action is RESPAWN:
            return engine.respawn_ids(ns, q, selection["ids"], selection["ttl"])
        return engine.delete_dead_ids(ns, q, selection["ids"])
    limit = selection["oldest"] if selection["oldest"] is not None else inspect.dead_size(ref.pool, ns, q)
    if limit <= 0:
        return 0
    if action is RESPAWN:
        return engine.respawn(ns, q, limit, selection["ttl"])
    return engine.delete_dead(ns, q, limit)


# -- topics ----------------------------------------------------------------------------------
@staff_page
def topic_list(request: HttpRequest) -> HttpResponse:
    topics = Topic.objects.select_related("namespace")
    ns_filter = request.GET.get("ns", "").strip()
    if ns_filter:
        topics = topics.filter(namespace__name=ns_filter)
    page = Paginator(topics, TOPIC_PAGE_SIZE).get_page(request.GET.get("page"))
    context = page_context(request, "Topics", nav="topics", page=page, topics=[topic_line(t) for t in page.object_list],
                           ns_filter=ns_filter, new_topic_url=reverse("queues_admin:topic_new"))
    return render(request, "queues/topic_list.html", context)


@staff_page
@require_http_methods(["GET", "POST"])
def topic_new(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        form = TopicForm(request.POST)
        if form.is_valid():
            topic = form.save()
            messages.success(request, f"Topic {topic.namespace.name}/{topic.queue} created.")
            return redirect("queues_admin:topic", topic.id)
    else:
        form = TopicForm(initial=new_topic_initial(request))
    context = page_context(request, "New topic", nav="topics", form=form, expression_check_url=expression_check_url(),
                           topics_url=reverse("queues_admin:topics"))
    return render(request, "queues/topic_new.html", context)


def new_topic_initial(request: HttpRequest) -> dict:
    """Prefill from a namespace or queue page's "new topic" link."""
    initial = {}
    namespace = Namespace.objects.filter(name=request.GET.get("ns", "")).first()
    if namespace:
        initial["namespace"] = namespace.pk
    if request.GET.get("queue"):
        initial["queue"] = request.GET["queue"]
    if request.GET.get("pool") in pools.pool_names():
        initial["pool"] = request.GET["pool"]
    return initial


def expression_check_url() -> str:
    return reverse("manage-expression-check")


@staff_page
@require_http_methods(["GET", "POST"])
def topic_page(request: HttpRequest, topic_id: int) -> HttpResponse:
    topic = get_object_or_404(Topic.objects.select_related("namespace"), id=topic_id)
    form = TopicForm(request.POST or None, instance=topic)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, f"Topic {topic.namespace.name}/{topic.queue} saved.")
        return redirect("queues_admin:topic", topic.id)
    return render(request, "queues/topic.html", topic_context(request, topic, form=form))


@staff_page
@require_POST
def topic_tester(request: HttpRequest, topic_id: int) -> HttpResponse:
    """The expression tester without JavaScript: a POST that renders the verdict."""
    topic = get_object_or_404(Topic.objects.select_related("namespace"), id=topic_id)
    tester = ExpressionTesterForm(request.POST)
    verdict = None
    if tester.is_valid():
        data = tester.cleaned_data
        if data["expression"].strip():
            verdict = check_expression(data["expression"], data["status"], data["body"])
        else:  # no expression: only the status decides
            verdict = {"valid": True, "error": None, "retry": False}
    return render(request, "queues/topic.html", topic_context(request, topic, tester=tester, verdict=verdict))


@staff_page
@require_POST
def topic_test_delivery(request: HttpRequest, topic_id: int) -> HttpResponse:
    topic = get_object_or_404(Topic.objects.select_related("namespace"), id=topic_id)
    try:
        record = send_test_delivery(topic)
    except redis.RedisError as exc:
        messages.error(request, f"The test delivery was sent but could not be logged: {exc}")
        return redirect("queues_admin:topic", topic.id)
    answer = f"status {record['status']}" if record["status"] else record["error"] or "no answer"
    text = (f"Test delivery {record['job_id']} to {topic.callback_url}: {answer} in {record['duration_ms']} ms "
            f"→ {record['outcome']}.")
    (messages.success if record["outcome"] == "success" else messages.warning)(request, text)
    return redirect(reverse("queues_admin:topic", args=[topic.id]) + "#attempts")


@staff_page
@require_http_methods(["GET", "POST"])
def topic_delete(request: HttpRequest, topic_id: int) -> HttpResponse:
    topic = get_object_or_404(Topic.objects.select_related("namespace"), id=topic_id)
    name = f"{topic.namespace.name}/{topic.queue}"
    if request.method == "POST":
        topic.delete()
        messages.success(request, f"Topic {name} deleted; its queue keeps its jobs.")
        return redirect("queues_admin:topics")
    return confirm_page(
        request, title="Delete topic", question=f"Delete the topic of {name}?",
        details=[f"Callback: {topic.callback_url}", "Push delivery stops within 2 s; the queue and its jobs stay."],
        action_url=request.path, cancel_url=reverse("queues_admin:topic", args=[topic.id]),
        submit_label="Yes, delete", breadcrumbs=[("Topics", reverse("queues_admin:topics"))])


def topic_context(request: HttpRequest, topic: Topic, form: TopicForm | None = None,
                  tester: ExpressionTesterForm | None = None, verdict: dict | None = None) -> dict:
    """The topic page: edit form, tester, test delivery, attempt log and delivery summary."""
    filters = AttemptFilterForm(request.GET or None)
    job_id, outcome = "", ""
    if filters.is_valid():
        job_id, outcome = filters.cleaned_data["job_id"].strip(), filters.cleaned_data["outcome"]
    attempts, attempts_error = read_or_error(inspect.attempts, topic.id, job_id=job_id or None,
                                             outcome=outcome or None, limit=ATTEMPTS_SHOWN)
    recent, summary_error = read_or_error(inspect.attempts, topic.id, limit=SUMMARY_ATTEMPTS)
    ref = QueueRef(topic.pool, topic.namespace.name, topic.queue)
    return page_context(
        request, f"Topic {ref.name}", nav="topics",
        topic=topic, form=form or TopicForm(instance=topic),
        tester=tester or ExpressionTesterForm(initial={"expression": topic.retry_expression, "status": 200}),
        verdict=verdict, filters=filters if request.GET else AttemptFilterForm(),
        attempts=attempts or [], attempts_error=attempts_error, filtered=bool(job_id or outcome),
        summary=delivery_summary(recent or []), summary_error=summary_error, summary_window=SUMMARY_ATTEMPTS,
        queue_url=ref.url(), namespace_url=namespace_url(ref.namespace),
        expression_check_url=expression_check_url(), topics_url=reverse("queues_admin:topics"),
        urls={name: reverse(f"queues_admin:{name}", args=[topic.id])
              for name in ("topic", "topic_tester", "topic_test_delivery", "topic_delete")})


def delivery_summary(records: list[dict]) -> dict:
    """Success rate and latency (p50/p95, nearest rank) over the given attempts."""
    durations = sorted(d for d in (_int_or_none(r.get("duration_ms")) for r in records) if d is not None)
    outcomes = [r.get("outcome") for r in records]
    successes = outcomes.count("success")
    return {"count": len(records), "successes": successes, "retries": outcomes.count("retry"),
            "dead": outcomes.count("dead"),
            "success_rate": round(100 * successes / len(records), 1) if records else None,
            "p50_ms": percentile(durations, 50), "p95_ms": percentile(durations, 95),
            "oldest": records[-1].get("at") if records else "", "newest": records[0].get("at") if records else ""}


def percentile(sorted_values: list[int], p: float) -> int | None:
    if not sorted_values:
        return None
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def _int_or_none(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
