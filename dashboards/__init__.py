"""Grafana dashboards as code: `make dashboards` (python -m dashboards) writes dashboards/*.json
from these modules with grafana-foundation-sdk; a test regenerates them and fails on a diff."""
