"""An endpoint's CloudWatch dashboard: traffic, latency, the instances' load and the endpoint's alarms.

Apart from SageMakerEndpoint because what an operator looks at changes for other reasons than what the endpoint
deploys; the endpoint hands over how it names its metrics and alarms.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

INSTANCE_NAMESPACE = "/aws/sagemaker/Endpoints"  # the instances' CPU, memory and disk


def endpoint_dashboard(
    scope: Construct, *, metric: Callable[..., cloudwatch.Metric], alarm_names: Mapping[str, str]
) -> cloudwatch.Dashboard:
    """`metric(name, statistic=..., namespace=...)`: one of the endpoint's metrics; `alarm_names`: its alarms by
    metric, shown by name."""
    dashboard = cloudwatch.Dashboard(scope, "Dashboard", default_interval=Duration.hours(3))
    dashboard.add_widgets(
        cloudwatch.GraphWidget(
            title="Invocations and errors",
            left=[metric(n) for n in ("Invocations", "Invocation4XXErrors", "Invocation5XXErrors")],
            width=12,
        ),
        cloudwatch.GraphWidget(
            title="Model latency (microseconds)",
            left=[metric("ModelLatency", statistic=s) for s in ("p50", "p90", "p99")],
            right=[metric("OverheadLatency", statistic="p90")],
            width=12,
        ),
    )
    dashboard.add_widgets(
        cloudwatch.GraphWidget(
            title="Instance CPU / memory / disk (%)",
            left=[
                metric(n, statistic="Average", namespace=INSTANCE_NAMESPACE)
                for n in ("CPUUtilization", "MemoryUtilization", "DiskUtilization")
            ],
            width=12,
        ),
        # By name, not by GetAtt: the ARN is known from the deterministic name (and the local
        # emulator, which does not model alarms, can still create the dashboard).
        cloudwatch.AlarmStatusWidget(
            title="Alarms",
            alarms=[
                cloudwatch.Alarm.from_alarm_name(scope, f"{name}Ref", alarm) for name, alarm in alarm_names.items()
            ],
            width=12,
        ),
    )
    return dashboard
