"""URL map of the web admin's dashboard pages, included at /admin/queues/ ahead
of the Django admin (lmstfy_site/urls.py).

/admin/queues/ is also the Django admin's app index of the `queues` app; the
overview takes it over (it links every model's changelist), while the model
pages (/admin/queues/<model>/...) still reach the Django admin because no route
here starts with a model name: namespaces live under ns/, queues under
ns/<ns>/q/<queue>/, topics under topics/.

    /admin/queues/                                       overview
    /admin/queues/ns/<ns>/                               namespace: tokens, limits, queues, topics
    /admin/queues/ns/<ns>/tokens/new/                    POST: create a token
    /admin/queues/ns/<ns>/tokens/<id>/created/           the new token, shown once
    /admin/queues/ns/<ns>/tokens/<id>/revoke/            confirm (GET) / revoke (POST)
    /admin/queues/ns/<ns>/tokens/<id>/limit/             edit the rate limit
    /admin/queues/ns/<ns>/tokens/<id>/limit/remove/      confirm / remove the rate limit
    /admin/queues/ns/<ns>/q/<queue>/[?pool=P]            queue: counts, charts, peek, dead letter
    /admin/queues/ns/<ns>/q/<queue>/job/<job_id>/        one job's body and fields
    /admin/queues/ns/<ns>/q/<queue>/pause/ | resume/     confirm / act
    /admin/queues/ns/<ns>/q/<queue>/dead/respawn/        ?ids=..&ids=.. | ?oldest=N | ?all=on: confirm, act
    /admin/queues/ns/<ns>/q/<queue>/dead/delete/         the same selection
    /admin/queues/ns/<ns>/q/<queue>/destroy/             confirm / act
    /admin/queues/topics/                                topics list
    /admin/queues/topics/new/                            new topic
    /admin/queues/topics/<id>/                           edit form, tester, attempt log, summary
    /admin/queues/topics/<id>/tester/                    POST: the expression tester (no JavaScript)
    /admin/queues/topics/<id>/test/                      POST: send a test delivery
    /admin/queues/topics/<id>/delete/                    confirm / delete
    /admin/queues/schedules/[?ns=N]                      schedules: next fire times, last fires (admin_schedule_views.py)
    /admin/queues/alerts/                                alert rules (admin_alert_views.py)
    /admin/queues/alerts/history/[?rule=ID&state=S]      alert events, newest first
"""
from __future__ import annotations

from django.urls import path

from queues import admin_alert_views, admin_schedule_views
from queues import admin_views as views

app_name = "queues_admin"

QUEUE = "ns/<str:ns>/q/<str:queue>/"
TOKEN = "ns/<str:ns>/tokens/<int:token_id>/"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("ns/<str:ns>/", views.namespace_page, name="namespace"),
    path("ns/<str:ns>/tokens/new/", views.token_create, name="token_create"),
    path(TOKEN + "created/", views.token_created, name="token_created"),
    path(TOKEN + "revoke/", views.token_revoke, name="token_revoke"),
    path(TOKEN + "limit/", views.token_limit, name="token_limit"),
    path(TOKEN + "limit/remove/", views.token_limit_remove, name="token_limit_remove"),
    path(QUEUE, views.queue_page, name="queue"),
    path(QUEUE + "job/<str:job_id>/", views.job_page, name="job"),
    path(QUEUE + "pause/", views.queue_pause, name="pause"),
    path(QUEUE + "resume/", views.queue_resume, name="resume"),
    path(QUEUE + "destroy/", views.queue_destroy, name="destroy"),
    path(QUEUE + "dead/respawn/", views.dead_respawn, name="dead_respawn"),
    path(QUEUE + "dead/delete/", views.dead_delete, name="dead_delete"),
    path("topics/", views.topic_list, name="topics"),
    path("topics/new/", views.topic_new, name="topic_new"),
    path("topics/<int:topic_id>/", views.topic_page, name="topic"),
    path("topics/<int:topic_id>/tester/", views.topic_tester, name="topic_tester"),
    path("topics/<int:topic_id>/test/", views.topic_test_delivery, name="topic_test_delivery"),
    path("topics/<int:topic_id>/delete/", views.topic_delete, name="topic_delete"),
    path("schedules/", admin_schedule_views.schedule_list, name="schedules"),
    path("alerts/", admin_alert_views.alert_rules, name="alerts"),
    path("alerts/history/", admin_alert_views.alert_history, name="alert_history"),
]
