"""Evaluates every PromQL expression of the Grafana dashboards and the
Prometheus rules through a running Prometheus' HTTP API (/api/v1/query), and
fails unless each returns data:
  - dashboard panel targets, with $job set to a Ringmaster job id and Grafana's
    interval variables to fixed ranges; the `job` template variable's query
    (label_values) must list the job;
  - recording rules: the expression, and the series the server recorded;
  - alerts: the expression must parse (the alert may be inactive), and every
    vector selector in it must select series;
  - /api/v1/rules: every rule loaded, none with an evaluation error.
Usage: check_promql.py PROMETHEUS_URL JOB_ID DASHBOARD.json... -- RULES.yml...
Standard library only (PyYAML is used for the rules when present; the
fallback reads the subset our rule files use)."""
import json
import re
import sys
import urllib.parse
import urllib.request

GRAFANA_VARS = {"$__rate_interval": "1m", "$__interval": "5s", "$__range": "5m", "${__range}": "5m"}
KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool",
            "offset", "inf", "nan", "atan2"}


def query(base, expr):
    url = base + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:  # 400: a parse or execution error, with a JSON body
        return json.load(e)


def get(base, path):
    with urllib.request.urlopen(base + path, timeout=10) as r:
        return json.load(r)


def load_rules(path):
    """[(kind, name, expr)] with kind 'record' or 'alert'."""
    text = open(path).read()
    try:
        import yaml
        doc = yaml.safe_load(text)
        return [("record" if "record" in r else "alert", r.get("record") or r.get("alert"), r["expr"])
                for g in doc["groups"] for r in g["rules"]]
    except ImportError:
        pass
    rules, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = re.match(r"\s*- (record|alert):\s*(\S+)", lines[i])
        if m:
            j = i + 1
            while not re.match(r"\s*expr:", lines[j]):
                j += 1
            inline = lines[j].split("expr:", 1)[1].strip()
            if inline in ("|", ">", "|-", ">-"):
                indent = len(lines[j]) - len(lines[j].lstrip())
                body, j = [], j + 1
                while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > indent):
                    body.append(lines[j].strip())
                    j += 1
                inline = " ".join(body)
            rules.append((m.group(1), m.group(2), inline))
            i = j
        else:
            i += 1
    return rules


def selectors(expr):
    """The vector selectors of a PromQL expression: metric names (with their
    matchers), leaving out functions, keywords, label lists and durations."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', lambda m: m.group(0).replace("(", "\0").replace(")", "\1"), expr)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(offset)\s+\S+", " ", e)
    found = []
    for m in re.finditer(r"(?<![\w:.])([a-zA-Z_:][\w:]*)\s*(\{[^}]*\})?", e):
        name, matchers = m.group(1), m.group(2) or ""
        rest = e[m.end():].lstrip()
        if name.lower() in KEYWORDS or rest.startswith("("):
            continue
        found.append((name + matchers).replace("\0", "(").replace("\1", ")"))
    return found


def main(argv):
    base, job = argv[1].rstrip("/"), argv[2]
    split = argv.index("--")
    dashboards, rule_files = argv[3:split], argv[split + 1:]
    failures, checked = [], 0

    def expect_data(what, expr):
        nonlocal checked
        checked += 1
        r = query(base, expr)
        if r.get("status") != "success":
            failures.append(f"{what}: {expr!r}: {r.get('errorType')}: {r.get('error')}")
        elif not r["data"]["result"]:
            failures.append(f"{what}: {expr!r}: no data")
        else:
            print(f"ok ({len(r['data']['result'])} series): {what}")

    for path in dashboards:
        dash = json.load(open(path))
        variables = {v["name"]: v for v in dash.get("templating", {}).get("list", [])}
        for name, var in variables.items():
            if var.get("type") == "datasource":
                # Picks the Prometheus the dashboard reads; every panel must use it.
                if var.get("query") != "prometheus":
                    failures.append(f"{path}: variable {name}: datasource type {var.get('query')!r}, not prometheus")
                for panel in dash["panels"]:
                    uid = (panel.get("datasource") or {}).get("uid")
                    if uid != "${" + name + "}":
                        failures.append(f"{path}: panel {panel['title']!r} reads datasource {uid!r}, not ${{{name}}}")
                continue
            q = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", q.strip())
            if not m:
                failures.append(f"{path}: variable {name}: unsupported query {q!r}")
                continue
            values = get(base, f"/api/v1/label/{m.group(2)}/values?" + urllib.parse.urlencode({"match[]": m.group(1)}))
            checked += 1
            if job not in values["data"]:
                failures.append(f"{path}: variable {name} ({q}) does not list {job}: {values['data']}")
        # Annotations mark events (restarts, checkpoints): their queries must
        # evaluate; an event need not have happened.
        for ann in dash.get("annotations", {}).get("list", []):
            expr = ann.get("expr", "")
            if not expr:
                continue
            expr = expr.replace("${job}", job).replace("$job", job)
            checked += 1
            r = query(base, expr)
            if r.get("status") != "success":
                failures.append(f"{path}: annotation {ann['name']!r}: {expr!r}: {r.get('errorType')}: {r.get('error')}")
            else:
                print(f"ok (evaluates): annotation {dash['title']} / {ann['name']}")
        panels = dash["panels"]
        if not panels:
            failures.append(f"{path}: no panels")
        for panel in panels:
            if not panel.get("targets"):
                failures.append(f"{path}: panel {panel['title']!r} has no query")
            for target in panel.get("targets", []):
                expr = target["expr"]
                for var, value in GRAFANA_VARS.items():
                    expr = expr.replace(var, value)
                expr = expr.replace("${job}", job).replace("$job", job)
                if "$" in expr:
                    failures.append(f"{path}: {panel['title']}: unknown variable in {expr!r}")
                    continue
                expect_data(f"{dash['title']} / {panel['title']}", expr)

    for path in rule_files:
        for kind, name, expr in load_rules(path):
            if kind == "record":
                expect_data(f"rule {name} (expression)", expr)
                expect_data(f"rule {name} (recorded series)", name)
                continue
            checked += 1
            r = query(base, expr)
            if r.get("status") != "success":
                failures.append(f"alert {name}: does not evaluate: {r.get('error')}")
            sels = selectors(expr)
            if not sels:
                failures.append(f"alert {name}: no selector found in {expr!r}")
            for s in dict.fromkeys(sels):
                expect_data(f"alert {name} selector", s)

    loaded = get(base, "/api/v1/rules")["data"]["groups"]
    rules = [r for g in loaded for r in g["rules"]]
    expected = sum(len(load_rules(p)) for p in rule_files)
    if len(rules) != expected:
        failures.append(f"Prometheus loaded {len(rules)} rules, the files have {expected}")
    for r in rules:
        if r.get("health") != "ok":
            failures.append(f"rule {r['name']}: health {r.get('health')}: {r.get('lastError')}")

    for f in failures:
        print("FAIL:", f)
    print(f"{checked} checks, {len(failures)} failed")
    return 1 if failures or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
