from __future__ import annotations

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.routers import DefaultRouter

from queues.api import manage

router = DefaultRouter()
router.register("namespaces", manage.NamespaceViewSet)
router.register("topics", manage.TopicViewSet)
router.register("schedules", manage.ScheduleViewSet)
router.register("alert-rules", manage.AlertRuleViewSet)
router.register("alert-events", manage.AlertEventViewSet, basename="alertevent")

manage_urlpatterns = [
    path("manage/v1/schema/", SpectacularAPIView.as_view(urlconf="queues.api.manage_urls",
                                                         authentication_classes=manage.StaffOnly.authentication_classes,
                                                         permission_classes=manage.StaffOnly.permission_classes),
         name="manage-schema"),
    path("manage/v1/expressions/check/", manage.ExpressionCheck.as_view(), name="manage-expression-check"),
    path("manage/v1/", include(router.urls)),
]
urlpatterns = manage_urlpatterns
