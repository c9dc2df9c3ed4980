"""/api/ routes (lmstfy's, then our extensions) and lmstfy's admin routes."""
from __future__ import annotations

from django.urls import path

from queues.api import lmstfy_admin, views

QUEUE = "api/<str:namespace>/<str:queue>"
JOB = QUEUE + "/job/<str:job_id>"

api_urlpatterns = [
    path("api/schema/", lmstfy_admin.ApiSchema.as_view()),
    path(QUEUE, views.QueueRoot.as_view()),
    path(QUEUE + "/bulk", views.BulkPublish.as_view()),
    path(JOB, views.JobDetail.as_view()),
    path(JOB + "/release", views.ReleaseJob.as_view()),
    path(QUEUE + "/peek", views.PeekQueue.as_view()),
    path(QUEUE + "/size", views.QueueSize.as_view()),
    path(QUEUE + "/deadletter", views.DeadLetter.as_view()),
    path(QUEUE + "/deadletter/size", views.DeadLetterSize.as_view()),
    path(QUEUE + "/deadletter/jobs", views.DeadLetterJobs.as_view()),
    path(QUEUE + "/deadletter/job/<str:job_id>", views.DeadLetterJob.as_view()),
    path(QUEUE + "/stats", views.Stats.as_view()),
    path(QUEUE + "/stats/due", views.DueHistogram.as_view()),
    path(QUEUE + "/pause", views.Pause.as_view()),
]

admin_urlpatterns = [
    path("token/<str:namespace>", lmstfy_admin.TokenList.as_view()),
    path("token/<str:namespace>/<str:token>", lmstfy_admin.TokenDetail.as_view()),
    path("token/<str:namespace>/<str:token>/limit", lmstfy_admin.TokenLimitDetail.as_view()),
    path("limits", lmstfy_admin.LimitList.as_view()),
    path("pools", lmstfy_admin.PoolList.as_view()),
    path("pools/", lmstfy_admin.PoolList.as_view()),
    path("info", lmstfy_admin.Info.as_view()),
    path("version", lmstfy_admin.Version.as_view()),
    path("metrics", lmstfy_admin.Metrics.as_view()),
]
