#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every query of the Grafana dashboard (dist/grafana/hugify.json) against a real Prometheus.

usage: dashboard_queries.py DASHBOARD PROMETHEUS_URL INSTANCE [RULES]

Takes each panel target's expr out of the JSON, gives the dashboard's variables fixed values ($instance:
INSTANCE, $cgroup: any, $__rate_interval: 10s, as Grafana would for a 1 s scrape), runs it as an instant
query, and prints one line per query: "data N EXPR" (N samples) or "empty EXPR" / "error MESSAGE EXPR".
With RULES (hugify-rules.yml) the recording rules' names are queried too. Exit 0 when every query
returned data, 1 otherwise. Run by tests/integration/agent_metrics.cpp
(Agent.DashboardQueriesReturnDataFromALiveAgent)."""
import json
import re
import sys
import urllib.parse
import urllib.request


def queries(dashboard):
    for panel in dashboard.get("panels", []):
        for target in panel.get("targets") or []:
            if target.get("expr"):
                yield panel.get("title", ""), target["expr"]


def fixed(expr, instance):
    # a regular expression inside a PromQL string: its backslashes doubled
    values = {"instance": re.escape(instance).replace("\\", "\\\\"), "cgroup": ".+", "__rate_interval": "10s", "__interval": "1s",
              "__range": "1m"}
    def replace(match):
        name = match.group(1) or match.group(2)
        if name not in values:
            raise KeyError("no fixed value for $" + name)
        return values[name]
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", replace, expr)


def run(url, expr):
    query = urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url + "/api/v1/query?" + query, timeout=10) as response:
        body = json.load(response)
    if body.get("status") != "success":
        raise RuntimeError(body.get("error", "query failed"))
    return body["data"]["result"]


def main():
    dashboard_path, url, instance = sys.argv[1:4]
    with open(dashboard_path) as f:
        dashboard = json.load(f)
    exprs = [expr for _, expr in queries(dashboard)]
    if len(sys.argv) > 4:
        with open(sys.argv[4]) as f:
            exprs += re.findall(r"^\s*- record: (\S+)", f.read(), re.M)
    ok = True
    for expr in exprs:
        try:
            result = run(url, fixed(expr, instance))
        except Exception as error:  # noqa: BLE001 - reported, and the run fails
            print("error %s %s" % (str(error).replace("\n", " "), expr))
            ok = False
            continue
        print(("data %d %s" % (len(result), expr)) if result else ("empty %s" % expr))
        ok = ok and bool(result)
    return 0 if ok and exprs else 1


if __name__ == "__main__":
    sys.exit(main())
