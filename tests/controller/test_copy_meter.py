"""cAdvisor's CFS counters of a copy's containers, from a node's /metrics/cadvisor as the
kubelet serves it (labels, and each sample's timestamp in ms)."""

from __future__ import annotations

from cxlab.analysis.copy_counters import PERIODS, THROTTLED
from cxlab.controller.copy_meter import cfs_counters

# As this cluster's kubelet wrote it for a Pod with a 500m CPU limit (one series per cgroup:
# the Pod's own, container "", its container's, and the pause container's without a name),
# trimmed to the families read and one other.
EXPOSITION = """\
# HELP container_cpu_cfs_periods_total Number of elapsed enforcement period intervals.
# TYPE container_cpu_cfs_periods_total counter
container_cpu_cfs_periods_total{container="",id="/kubepods/burstable/pod70a6",image="",name="",namespace="lab",pod="cx-a-v1-7d9f-x2"} 900 1796184169803
container_cpu_cfs_periods_total{container="httpbin",id="/kubepods/burstable/pod70a6/25a8",image="cxlab.dev/httpbin:dev",name="25a8",namespace="lab",pod="cx-a-v1-7d9f-x2"} 812 1796184169803
container_cpu_cfs_periods_total{container="httpbin",id="/kubepods/burstable/pod99/11",image="cxlab.dev/httpbin:dev",name="11",namespace="other",pod="cx-a-v1-7d9f-x2"} 5 1796184169803
# HELP container_cpu_cfs_throttled_periods_total Number of throttled period intervals.
# TYPE container_cpu_cfs_throttled_periods_total counter
container_cpu_cfs_throttled_periods_total{container="httpbin",id="/kubepods/burstable/pod70a6/25a8",image="cxlab.dev/httpbin:dev",name="25a8",namespace="lab",pod="cx-a-v1-7d9f-x2"} 203 1796184169803
container_cpu_cfs_throttled_periods_total{id="/kubepods/burstable/pod70a6/0937",image="",name="0937",namespace="lab",pod="cx-a-v1-7d9f-x2"} 0 1796184169803
# HELP container_memory_working_set_bytes Current working set in bytes.
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="httpbin",id="/kubepods/burstable/pod70a6/25a8",image="",name="25a8",namespace="lab",pod="cx-a-v1-7d9f-x2"} 7.3879552e+07 1796184169803
"""  # noqa: E501 (the kubelet's lines as they are)


def test_the_cfs_counters_of_the_copys_containers_only_with_their_timestamps() -> None:
    found = cfs_counters(EXPOSITION, "lab", ["cx-a-v1-7d9f-x2"])
    assert found == {
        ("cx-a-v1-7d9f-x2", "httpbin"): {
            PERIODS: (812, 1796184169803), THROTTLED: (203, 1796184169803),
        },
    }  # fmt: skip
    assert cfs_counters(EXPOSITION, "lab", ["another-pod"]) == {}


# As this cluster's kubelet writes it since (containerd's containers unlabelled to cAdvisor):
# the Pod's own cgroup is the one series of the Pod's.
POD_ONLY = """\
# HELP container_cpu_cfs_periods_total Number of elapsed enforcement period intervals.
# TYPE container_cpu_cfs_periods_total counter
container_cpu_cfs_periods_total{container="",id="/kubepods/pod6534",image="",name="",namespace="lab",pod="cx-a-v1-7d9f-x2"} 46 1796305146924
container_cpu_cfs_periods_total{container="",id="/kubepods/pod6534/b473",image="",name="",namespace="",pod=""} 44 1796305146924
# HELP container_cpu_cfs_throttled_periods_total Number of throttled period intervals.
# TYPE container_cpu_cfs_throttled_periods_total counter
container_cpu_cfs_throttled_periods_total{container="",id="/kubepods/pod6534",image="",name="",namespace="lab",pod="cx-a-v1-7d9f-x2"} 9 1796305146924
"""  # noqa: E501 (the kubelet's lines as they are)


def test_without_a_series_by_container_the_pods_own_cgroup_stands_for_them() -> None:
    found = cfs_counters(POD_ONLY, "lab", ["cx-a-v1-7d9f-x2"])
    assert found == {("cx-a-v1-7d9f-x2", ""): {PERIODS: (46, 1796305146924),
                                               THROTTLED: (9, 1796305146924)}}  # fmt: skip
    # with a series by container, the Pod's own is left out (it would count them twice)
    assert ("cx-a-v1-7d9f-x2", "") not in cfs_counters(EXPOSITION, "lab", ["cx-a-v1-7d9f-x2"])
