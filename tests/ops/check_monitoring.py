#!/usr/bin/env python3
"""check_monitoring.py: the Grafana dashboard and Prometheus alerts against Grafana's dashboard model and keygate's metric list.

Usage: check_monitoring.py [--dashboard F] [--alerts F] [--metrics F] [--src DIR] [--promtool PATH]
(defaults: the repo's conf/grafana/keygate.json, conf/prometheus/keygate-alerts.yml,
conf/prometheus/metric-names.txt, src/). Prints one line per problem as `FILE: where: what` and
exits 1 when there is any, else prints a summary and exits 0.

Checks:
- the dashboard is the JSON model Grafana imports: title, uid (1..40 of [A-Za-z0-9_-]), an integer
  schemaVersion, time, templating.list (each variable with name and type; query variables with a
  datasource and a query), panels (recursively inside rows): a unique integer id, a known type,
  gridPos {h, w, x, y} inside the 24-column grid and not overlapping; every non-row panel a
  datasource and targets, each with a refId (unique in the panel) and a non-empty expr;
- every $variable an expr uses is defined (or one of Grafana's $__ builtins);
- every metric an expr names (dashboard and alerts) is keygate's: src/admin.c, src/stats.c, src/sampler.c, the STATS_COUNTERS of
  src/stats.h (keygate_X_total), or metric-names.txt (a histogram's _bucket/_sum/_count too); the
  "future" ones only inside a dashboard row whose title says future, never in an alert; every label
  matcher and by/without label is one the metrics carry (or job, instance, le); no metric of the list
  carries instance, job or exported_instance itself (Prometheus's target labels: a collision);
- every metric-names.txt line marked "main" is served by src/admin.c, src/stats.c or src/sampler.c (the file cannot claim more);
- the dashboard covers the panels an operator needs, the alerts the alerts (by the metrics they read);
- every dashboard expr parses as PromQL (promtool check rules on a rules file made of them, the
  Grafana variables replaced), and every alert has severity, summary and description.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PANEL_TYPES = {"row", "timeseries", "stat", "gauge", "bargauge", "table", "text", "heatmap", "piechart",
               "state-timeline", "status-history", "histogram", "logs"}
VAR_TYPES = {"query", "datasource", "custom", "interval", "constant", "textbox", "adhoc"}
TARGET_LABELS = {"job", "instance"}  # added by Prometheus's scrape: keygate's own series never carry them
# what Prometheus makes of a target label a series carries itself (honor_labels: false): never keygate's
COLLIDING_LABELS = TARGET_LABELS | {"exported_instance", "exported_job"}
PROM_NAMES = {"up"}  # series Prometheus makes itself
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or",
                "unless"}

problems = []


def problem(where, what):
    problems.append(f"{where}: {what}")


class Metrics:
    """keygate's metric names: name -> (type, labels, status)."""

    def __init__(self, metrics_file, src):
        self.m = {}
        self.file = metrics_file
        with open(metrics_file) as f:
            for lineno, line in enumerate(f, 1):
                line = line.split("#", 1)[0].strip()
                if not line:
                    continue
                parts = line.split()
                if len(parts) != 4 or parts[1] not in ("counter", "gauge", "histogram") or \
                        parts[3] not in ("main", "new", "future"):
                    problem(f"{metrics_file}:{lineno}", f"expected NAME counter|gauge|histogram LABELS "
                                                        f"main|new|future, got '{line}'")
                    continue
                labels = set() if parts[2] == "-" else set(parts[2].split(","))
                if labels & COLLIDING_LABELS:
                    problem(f"{metrics_file}:{lineno}", f"{parts[0]} carries {', '.join(sorted(labels & COLLIDING_LABELS))}: "
                                                        f"Prometheus's target labels (name a backend with backend)")
                if parts[0] in self.m:
                    problem(f"{metrics_file}:{lineno}", f"{parts[0]} listed twice")
                self.m[parts[0]] = (parts[1], labels, parts[3])
        served = set()
        for f in SERVING_FILES:  # the files that write /metrics
            served |= set(re.findall(r"(?:keygate|process)_[a-z0-9_]+", open(os.path.join(src, f)).read()))
        for name, (_, _, status) in self.m.items():
            if status == "main" and name not in served:
                problem(metrics_file, f"{name} is marked main but {', '.join(SERVING_FILES)} do not serve it")
        self.newly_served = sorted(n for n, v in self.m.items() if v[2] == "new" and n in served)
        stats = open(os.path.join(src, "stats.h")).read()
        block = stats[stats.index("#define STATS_COUNTERS(X)"):]
        block = block[:block.index("\n\n")]
        self.counters = re.findall(r"X\((\w+),", block)
        if not self.counters:
            problem(os.path.join(src, "stats.h"), "no STATS_COUNTERS found")
        for c in self.counters:
            self.m.setdefault(f"keygate_{c}_total", ("counter", set(), "main"))
        for n in served - set(self.m):  # served by the sources but not in the list: known, no labels checked
            if not n.endswith("_"):
                self.m[n] = ("gauge", None, "main")

    def resolve(self, name):
        """(base name, entry, is_bucket) or None."""
        if name in self.m:
            return name, self.m[name], False
        for suffix in ("_bucket", "_sum", "_count"):
            base = name[: -len(suffix)]
            if name.endswith(suffix) and base in self.m and self.m[base][0] == "histogram":
                return base, self.m[base], suffix == "_bucket"
        return None


def strip_strings(expr):
    """expr with the insides of "..." replaced by nothing (label values hold no names to check)."""
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)


def check_expr(where, expr, metrics, allow_future):
    """Check the metric names and labels of one PromQL expression; returns the keygate metrics it reads."""
    used = set()
    bare = strip_strings(expr)
    names = set()
    for m in re.finditer(r"(?<![\w:])([a-zA-Z_:][\w:]*)\s*(\{[^}]*\})?", bare):
        word, braces = m.group(1), m.group(2)
        after = bare[m.end():m.end() + 1]
        if word.startswith("keygate_"):
            r = metrics.resolve(word)
            if not r:
                problem(where, f"unknown metric {word} (not served by src/admin.c, stats.c, sampler.c, not in src/stats.h or {metrics.file})")
                continue
            base, (typ, labels, status), is_bucket = r
            used.add(base)
            names.add(base)
            if status == "future" and not allow_future:
                problem(where, f"{word} is a future metric (no code serves it): only the near-cache row may use it")
            if braces and labels is not None:
                allowed = labels | TARGET_LABELS | ({"le"} if is_bucket else set())
                for lab in re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", braces):
                    if lab not in allowed:
                        problem(where, f"{word} has no label '{lab}' (it has: {', '.join(sorted(allowed))})")
        elif word in PROM_NAMES and (braces or after != "("):
            names.add(word)
    # by (...) / without (...) / on (...) / ignoring (...): labels some metric of the expression has
    allowed = set(TARGET_LABELS) | {"le"}
    for n in names:
        entry = metrics.m.get(n)
        if entry and entry[1] is not None:
            allowed |= entry[1]
        elif n not in metrics.m:
            allowed |= set()
        else:
            allowed = None
            break
    if allowed is not None:
        for m in re.finditer(r"\b(by|without|on|ignoring)\s*\(([^)]*)\)", bare):
            for lab in [x.strip() for x in m.group(2).split(",") if x.strip()]:
                if lab not in allowed:
                    problem(where, f"{m.group(1)} ({lab}): no metric of the expression has label '{lab}'")
    return used


def check_dashboard(path, metrics, promtool):
    try:
        d = json.load(open(path))
    except (OSError, ValueError) as e:
        problem(path, f"not JSON: {e}")
        return set()
    if not isinstance(d, dict):
        problem(path, "the dashboard must be a JSON object")
        return set()
    for key, typ in (("title", str), ("uid", str), ("schemaVersion", int), ("panels", list), ("templating", dict),
                     ("time", dict)):
        if not isinstance(d.get(key), typ) or isinstance(d.get(key), bool):
            problem(path, f"'{key}' must be a {typ.__name__}")
    if isinstance(d.get("title"), str) and not d["title"].strip():
        problem(path, "'title' is empty")
    if isinstance(d.get("uid"), str) and not re.fullmatch(r"[A-Za-z0-9_-]{1,40}", d["uid"]):
        problem(path, f"uid '{d['uid']}' must be 1..40 characters of A-Z a-z 0-9 _ -")
    if isinstance(d.get("schemaVersion"), int) and d["schemaVersion"] < 27:
        problem(path, f"schemaVersion {d['schemaVersion']} predates the timeseries panel (27)")
    if "id" in d and d["id"] is not None:
        problem(path, "a dashboard to import has no 'id' (or null): Grafana assigns it")
    if isinstance(d.get("time"), dict) and not {"from", "to"} <= set(d["time"]):
        problem(path, "'time' needs from and to")

    variables = set()
    tlist = d.get("templating", {}).get("list") if isinstance(d.get("templating"), dict) else None
    if not isinstance(tlist, list):
        problem(path, "templating.list must be a list")
        tlist = []
    for i, v in enumerate(tlist):
        where = f"{path}: templating.list[{i}]"
        if not isinstance(v, dict) or not isinstance(v.get("name"), str) or not v.get("name"):
            problem(where, "a variable needs a name")
            continue
        variables.add(v["name"])
        if v.get("type") not in VAR_TYPES:
            problem(where, f"variable {v['name']}: type '{v.get('type')}' is not one of {sorted(VAR_TYPES)}")
        if v.get("type") == "query":
            q = v.get("query")
            qtext = q.get("query") if isinstance(q, dict) else q
            if not v.get("datasource") or not isinstance(qtext, str) or not qtext:
                problem(where, f"query variable {v['name']} needs a datasource and a query")
            else:
                inner = re.match(r"label_values\((.*),\s*(\w+)\)$", qtext)
                check_expr(f"{where} ({v['name']})", inner.group(1) if inner else qtext, metrics, False)
        if v.get("type") == "datasource" and v.get("query") != "prometheus":
            problem(where, f"datasource variable {v['name']} must have query 'prometheus'")

    used, exprs, ids = set(), [], {}
    top_rects = []

    def walk(panels, in_future_row, nested):
        for i, p in enumerate(panels):
            where = f"{path}: panel {p.get('id', '?')} '{p.get('title', '')}'" if isinstance(p, dict) else path
            if not isinstance(p, dict):
                problem(path, f"panels[{i}] is not an object")
                continue
            pid = p.get("id")
            if not isinstance(pid, int) or isinstance(pid, bool):
                problem(where, "needs an integer id")
            elif pid in ids:
                problem(where, f"id {pid} is also panel '{ids[pid]}'")
            else:
                ids[pid] = p.get("title", "")
            if p.get("type") not in PANEL_TYPES:
                problem(where, f"type '{p.get('type')}' is not a Grafana panel type")
            g = p.get("gridPos")
            if not isinstance(g, dict) or not all(isinstance(g.get(k), int) for k in "hwxy"):
                problem(where, "gridPos needs integer h, w, x, y")
            elif g["w"] < 1 or g["h"] < 1 or g["x"] < 0 or g["y"] < 0 or g["x"] + g["w"] > 24:
                problem(where, f"gridPos {g} is outside the 24-column grid")
            elif not nested:
                top_rects.append((where, g))
            if p.get("type") == "row":
                if nested:
                    problem(where, "a row inside a row")
                if not isinstance(p.get("panels", []), list):
                    problem(where, "a row's panels must be a list")
                elif p.get("panels") and not p.get("collapsed"):
                    problem(where, "an expanded row holds no panels (they follow it at top level)")
                else:
                    walk(p.get("panels", []), "future" in str(p.get("title", "")).lower(), True)
                in_future_row = "future" in str(p.get("title", "")).lower()
                continue
            if not p.get("datasource"):
                problem(where, "needs a datasource")
            targets = p.get("targets")
            if not isinstance(targets, list) or not targets:
                problem(where, "needs targets")
                continue
            refids = set()
            for t in targets:
                if not isinstance(t, dict) or not isinstance(t.get("expr"), str) or not t["expr"].strip():
                    problem(where, "a target needs a non-empty expr")
                    continue
                if not t.get("refId") or t["refId"] in refids:
                    problem(where, f"target refId '{t.get('refId')}' missing or repeated")
                refids.add(t.get("refId"))
                for var in re.findall(r"\$\{?(\w+)", t["expr"]):
                    if var not in variables and not var.startswith("__"):
                        problem(where, f"expr uses ${var}, which templating.list does not define")
                used.update(check_expr(where, t["expr"], metrics, in_future_row))
                exprs.append((where, t["expr"]))

    walk(d.get("panels", []) if isinstance(d.get("panels"), list) else [], False, False)
    for i in range(len(top_rects)):
        for j in range(i + 1, len(top_rects)):
            (wa, a), (wb, b) = top_rects[i], top_rects[j]
            if a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and a["y"] < b["y"] + b["h"] and \
                    b["y"] < a["y"] + a["h"]:
                problem(wa, f"overlaps {wb.split(': ', 1)[1]}")

    if exprs and promtool:
        rules = {"groups": [{"name": "dashboard", "rules": []}]}
        for n, (where, e) in enumerate(exprs):
            e = e.replace("$__rate_interval", "5m").replace("$__interval", "1m").replace("$__range", "1h")
            e = re.sub(r"\$\{?\w+\}?", ".*", e)
            rules["groups"][0]["rules"].append({"record": f"dashboard:expr_{n}", "expr": e})
        with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
            yaml.safe_dump(rules, f)
        out = subprocess.run([promtool, "check", "rules", f.name], capture_output=True, text=True)
        os.unlink(f.name)
        if out.returncode != 0:
            problem(path, "a dashboard expr is not PromQL (promtool check rules on them):\n" +
                    (out.stdout + out.stderr).strip())
    return used


def check_alerts(path, metrics):
    try:
        doc = yaml.safe_load(open(path))
    except (OSError, yaml.YAMLError) as e:
        problem(path, f"not YAML: {e}")
        return set(), set()
    used, names = set(), set()
    groups = doc.get("groups") if isinstance(doc, dict) else None
    if not isinstance(groups, list) or not groups:
        problem(path, "needs groups")
        return used, names
    for g in groups:
        for r in g.get("rules", []):
            name = r.get("alert")
            where = f"{path}: alert {name}"
            if not name:
                problem(path, f"group {g.get('name')}: a rule that is not an alert: {r}")
                continue
            if not re.fullmatch(r"Keygate[A-Z][A-Za-z]+", name):
                problem(where, "alert names are KeygateCamelCase")
            if name in names:
                problem(where, "defined twice")
            names.add(name)
            if r.get("labels", {}).get("severity") not in ("critical", "warning", "info"):
                problem(where, "labels.severity must be critical, warning or info")
            ann = r.get("annotations", {})
            if not ann.get("summary") or not ann.get("description"):
                problem(where, "needs annotations summary and description")
            used.update(check_expr(where, str(r.get("expr", "")), metrics, False))
    return used, names


# The sources that write /metrics: admin.c (global and report series), stats.c (per namespace,
# latency), sampler.c (the namespace sampler).
SERVING_FILES = ("admin.c", "stats.c", "sampler.c", "nearcache.c", "budget.c")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dashboard", default=os.path.join(ROOT, "conf/grafana/keygate.json"))
    ap.add_argument("--alerts", default=os.path.join(ROOT, "conf/prometheus/keygate-alerts.yml"))
    ap.add_argument("--metrics", default=os.path.join(ROOT, "conf/prometheus/metric-names.txt"))
    ap.add_argument("--src", default=os.path.join(ROOT, "src"))
    ap.add_argument("--promtool", default="promtool")
    a = ap.parse_args()
    metrics = Metrics(a.metrics, a.src)
    dash_used = check_dashboard(a.dashboard, metrics, a.promtool)
    alert_used, alerts = check_alerts(a.alerts, metrics)

    # the panels and alerts an operator needs, by the metrics they must read
    for what, need in (("per-namespace rates", "keygate_namespace_commands_total"),
                       ("per-namespace refusals", "keygate_namespace_refused_total"),
                       ("request latency percentiles", "keygate_request_duration_seconds"),
                       ("backend latency percentiles", "keygate_backend_latency_seconds"),
                       ("durable headroom", "keygate_backend_memory_headroom_ratio"),
                       ("cache hit ratio (hits)", "keygate_backend_keyspace_hits_total"),
                       ("cache hit ratio (misses)", "keygate_backend_keyspace_misses_total"),
                       ("evictions", "keygate_backend_evicted_keys_total"),
                       ("near-cache hits", "keygate_near_cache_hits_total"),
                       ("near-cache invalidation lag", "keygate_near_cache_invalidation_lag_seconds")):
        if need not in dash_used:
            problem(a.dashboard, f"no panel shows {what} ({need})")
    dash = json.load(open(a.dashboard)) if os.path.exists(a.dashboard) else {}
    if "histogram_quantile" not in json.dumps(dash):
        problem(a.dashboard, "no latency percentile (histogram_quantile) panel")
    for what, need in (("durable headroom", "keygate_backend_memory_headroom_ratio"),
                       ("evictions on durable", "keygate_backend_evicted_keys_total"),
                       ("topology guard failing", "keygate_topology_ok"),
                       ("instance down", "keygate_instance_up"),
                       ("refusals spiking", "keygate_namespace_refused_total"),
                       ("near-cache invalidation lag", "keygate_near_cache_invalidation_lag_seconds"),
                       ("near-cache gap flushes", "keygate_near_cache_evictions_total")):
        if need not in alert_used:
            problem(a.alerts, f"no alert on {what} ({need})")

    for p in problems:
        print(p)
    if problems:
        print(f"check_monitoring: {len(problems)} problem(s)")
        return 1
    future = sorted(n for n, v in metrics.m.items() if v[2] == "future")
    new = sorted(n for n, v in metrics.m.items() if v[2] == "new")
    print(f"check_monitoring: dashboard ok ({len(dash_used)} keygate metrics), {len(alerts)} alerts ok; "
          f"{len(new)} metrics not in main yet, future: {', '.join(future)}")
    if metrics.newly_served:
        print("check_monitoring: now served by the sources, mark them main in metric-names.txt: " +
              ", ".join(metrics.newly_served))
    return 0


if __name__ == "__main__":
    sys.exit(main())
