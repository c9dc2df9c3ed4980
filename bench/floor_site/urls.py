"""The same URL shapes as the real /api/ routes, so one load script drives both."""
from __future__ import annotations

from django.urls import path

from bench.floor_site import views

QUEUE = "api/<str:namespace>/<str:queue>"

urlpatterns = [
    path("ping", views.ping),
    path(QUEUE, views.queue_root),
    path(QUEUE + "/bulk", views.bulk_publish),
    path(QUEUE + "/job/<str:job_id>", views.ack),
]
