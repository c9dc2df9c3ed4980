"""The management API (/manage/v1/): configuration as REST, staff only (HTTP
Basic or an admin session). Thin viewsets; the router makes the URLs."""
from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import viewsets
from rest_framework.authentication import BasicAuthentication, SessionAuthentication
from rest_framework.decorators import action
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.permissions import IsAdminUser
from rest_framework.response import Response
from rest_framework.views import APIView

from queues import inspect
from queues.api import serializers
from queues.expressions import check
from queues.models import AlertEvent, AlertRule, Namespace, Schedule, Topic
from queues.notifier import send_test_delivery

MAX_ATTEMPTS_PAGE = 500


class StaffOnly:
    authentication_classes = [BasicAuthentication, SessionAuthentication]
    permission_classes = [IsAdminUser]
    pagination_class = LimitOffsetPagination


class NamespaceViewSet(StaffOnly, viewsets.ModelViewSet):
    queryset = Namespace.objects.all()
    serializer_class = serializers.NamespaceSerializer
    lookup_field = "name"


class TopicViewSet(StaffOnly, viewsets.ModelViewSet):
    queryset = Topic.objects.select_related("namespace")
    serializer_class = serializers.TopicSerializer

    @extend_schema(parameters=[OpenApiParameter("job_id", str), OpenApiParameter("outcome", str),
                               OpenApiParameter("limit", int)],
                   responses=serializers.AttemptSerializer(many=True))
    @action(detail=True, methods=["get"])
    def attempts(self, request, pk=None):
        topic = self.get_object()
        try:
            limit = min(max(int(request.query_params.get("limit", 50)), 1), MAX_ATTEMPTS_PAGE)
        except ValueError:
            limit = 50
        records = inspect.attempts(topic.id, job_id=request.query_params.get("job_id") or None,
                                   outcome=request.query_params.get("outcome") or None, limit=limit)
        return Response(serializers.AttemptSerializer(records, many=True).data)

    @extend_schema(request=None, responses=serializers.AttemptSerializer)
    @action(detail=True, methods=["post"])
    def test(self, request, pk=None):
        record = send_test_delivery(self.get_object())
        return Response(serializers.AttemptSerializer(record).data)


class ExpressionCheck(StaffOnly, APIView):
    """Parse a retry expression and evaluate it on a sample answer."""

    @extend_schema(request=serializers.ExpressionCheckSerializer)
    def post(self, request):
        given = serializers.ExpressionCheckSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        return Response(check(data["expression"], data["status"], data["body"]))


class ScheduleViewSet(StaffOnly, viewsets.ModelViewSet):
    queryset = Schedule.objects.select_related("namespace")
    serializer_class = serializers.ScheduleSerializer


class AlertRuleViewSet(StaffOnly, viewsets.ModelViewSet):
    queryset = AlertRule.objects.select_related("namespace")
    serializer_class = serializers.AlertRuleSerializer


class AlertEventViewSet(StaffOnly, viewsets.ReadOnlyModelViewSet):
    """The alert history, newest first; `?rule=<id>`, `?kind=`, `?firing=true|false`."""

    serializer_class = serializers.AlertEventSerializer

    @extend_schema(parameters=[OpenApiParameter("rule", int), OpenApiParameter("kind", str),
                               OpenApiParameter("firing", bool)])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    def get_queryset(self):
        events = AlertEvent.objects.select_related("rule")
        params = self.request.query_params
        if params.get("rule", "").isdigit():
            events = events.filter(rule_id=int(params["rule"]))
        if params.get("kind"):
            events = events.filter(kind=params["kind"])
        if params.get("firing") in ("true", "1"):
            events = events.filter(resolved_at__isnull=True, rule__isnull=False)
        elif params.get("firing") in ("false", "0"):
            events = events.exclude(resolved_at__isnull=True, rule__isnull=False)
        return events
