#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (fuzz/seeds/<target>/) from the repository's fixtures
(tests/fixtures), the YAML examples in docs/, the formula cases of api/src/formula/tests.rs
a few hand-written requests, and the inputs of fuzz/regressions/<target>/ (what a run once
stopped on, kept so the fix stays tested). Run from anywhere: python3 fuzz/seeds.py (needs PyYAML).
The seeds are committed; rerun this after changing fixtures or docs examples."""

import glob
import hashlib
import json
import os
import re
import shutil
import struct

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ANSWERS = os.path.join(ROOT, "fuzz", "answers")
OUT = os.path.join(ROOT, "fuzz", "seeds")


def write(target, data):
    if isinstance(data, str):
        data = data.encode()
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()[:16]
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def documents():
    """Every YAML document of the fixtures and of the docs' YAML code blocks, as text."""
    texts = []
    for path in sorted(glob.glob(os.path.join(ROOT, "tests/fixtures/**/*.yaml"), recursive=True)):
        with open(path) as f:
            texts.append(f.read())
    for path in sorted(glob.glob(os.path.join(ROOT, "docs/**/*.md"), recursive=True)):
        with open(path) as f:
            texts += re.findall(r"```ya?ml\n(.*?)```", f.read(), re.S)
    docs = []
    for text in texts:
        for part in re.split(r"^---\s*$", text, flags=re.M):
            if part.strip():
                docs.append(part)
    return docs


def trigger_text(trigger, auth):
    lines = [str(trigger.get("type", ""))]
    for k, v in (trigger.get("metadata") or {}).items():
        lines.append(f"{k}={v}")
    for k in auth:
        lines.append(f"auth.{k}=fuzz-secret-{k}")
    if trigger.get("metricType"):
        lines.append(f"!metricType={trigger['metricType']}")
    if trigger.get("name"):
        lines.append(f"!name={trigger['name']}")
    if trigger.get("useCachedMetrics"):
        lines.append("!cached")
    return "\n".join(lines)


def answer(source, name):
    with open(os.path.join(ANSWERS, source, name), "rb") as f:
        return f.read()


def http_answer(body, content_type="application/json"):
    head = f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def loopback(text):
    """`text` with the host of every address-like value replaced by 127.0.0.1."""
    text = re.sub(r"(?<=://)[A-Za-z0-9_.-]+(?=[:/])", "127.0.0.1", text)
    return re.sub(r"(?m)(?<==)[A-Za-z][A-Za-z0-9_.-]*(?=:\d+)", "127.0.0.1", text)


# What the fake servers of `scaler_connect` answer a trigger of each type (real answers of
# fuzz/answers/ where the source is HTTP), by type.
def connect_answers():
    return {
        "prometheus": http_answer(answer("prometheus", "vector.json")),
        "metrics-api": http_answer(answer("metrics-api", "buildinfo.json")),
        "rabbitmq": http_answer(answer("rabbitmq", "queue.json")),
        "nats-jetstream": http_answer(answer("nats", "jsz.json")),
        "aws-sqs-queue": http_answer(answer("aws-sqs", "attributes.json"), "application/x-amz-json-1.0"),
        "aws-cloudwatch": http_answer(answer("aws-cloudwatch", "metric-data.xml"), "text/xml"),
        "azure-queue": http_answer(answer("azure-queue", "doc-peek-messages.xml"), "application/xml"),
        "azure-blob": http_answer(answer("azure-blob", "doc-list-blobs.xml"), "application/xml"),
        "beanstalkd": b"OK 265\r\n" + answer("beanstalkd", "stats-tube.yaml") + b"\r\n",
        "redis": b"+OK\r\n:3\r\n",
        "redis-streams": b"+OK\r\n:3\r\n",
    }


# The parsers of the `response_parsers` target, in the target's order, each with
# (parameter, answer) seeds.
def parser_seeds():
    prom = ["vector.json", "scalar.json", "matrix-error.json", "parse-error.json", "series.json"]
    queries = {"vector.json": "vector(3)", "scalar.json": "scalar(vector(2.5))",
               "matrix-error.json": "up[5m]", "parse-error.json": "sum((",
               "series.json": "prometheus_build_info"}
    pg = sorted(os.listdir(os.path.join(ANSWERS, "postgresql")))
    return [
        [("data.result.0.value.1", answer("prometheus", "vector.json")),
         ("data.version", answer("metrics-api", "buildinfo.json")),
         ("data.activeTargets.#(health==\"up\").scrapeInterval", answer("metrics-api", "targets.json")),
         ("messages", answer("rabbitmq", "queue.json")),
         ("items.0.messages_ready", answer("rabbitmq", "queues.json")),
         ("Attributes.ApproximateNumberOfMessages", answer("aws-sqs", "attributes.json"))],
        [("current-jobs-ready", answer("beanstalkd", "stats-tube.yaml")),
         ("data.result", answer("prometheus", "vector.json"))],
        [("GetMetricDataResponse.GetMetricDataResult.MetricDataResults.member.Values.member",
          answer("aws-cloudwatch", "metric-data.xml")),
         ("QueueMessagesList.QueueMessage.DequeueCount", answer("azure-queue", "doc-peek-messages.xml"))],
        [("prometheus_http_requests_total{code=\"200\",handler=\"/metrics\"}",
          answer("prometheus-text", "metrics.txt")),
         ("go_goroutines", answer("prometheus-text", "metrics.txt"))],
        [(queries[name], answer("prometheus", name)) for name in prom],
        [("", answer("beanstalkd", "stats-tube.yaml"))],
        [("", b"3"), ("", b"1e3"), ("", b"0x1p-2"), ("", b"-Inf")],
        [("application/json", answer("oauth2", "doc-rfc6749.json")),
         ("application/x-www-form-urlencoded", answer("oauth2", "doc-form.txt"))],
        [("", answer("aws-sts", "error.xml")), ("", answer("aws-sqs", "error.json"))],
        [("", answer("azure-error", "doc-queue-not-found.xml"))],
        [("", answer("aws-sts", "assume-role.xml")), ("", answer("aws-sts", "error.xml"))],
        [("ApproximateNumberOfMessages,ApproximateNumberOfMessagesNotVisible",
          answer("aws-sqs", "attributes.json"))],
        [("", answer("aws-cloudwatch", "metric-data.xml"))],
        [("", answer("azure-queue", "doc-peek-messages.xml"))],
        [("", answer("azure-blob", "doc-list-blobs.xml"))],
        [("", answer("postgresql", name)) for name in pg],
        [("$G,$G,orders,workers", answer("nats", "jsz.json"))],
        [("", answer("rabbitmq", "queues.json")), ("", answer("rabbitmq", "queue.json"))],
        [("", answer("activator-report", "lines.jsonl")),
         ("", answer("activator-report", "lines.jsonl").replace(b"\n{", b"\n\x1e{", 1).replace(b"sample", b"sam\x1eple", 1))],
        [("", answer("influxdb", name))
         for name in sorted(os.listdir(os.path.join(ANSWERS, "influxdb")))],
        [("hits.total.value", answer("elasticsearch", name))
         for name in sorted(os.listdir(os.path.join(ANSWERS, "elasticsearch")))],
        [('sum(rate({app="api"}[1m]))', answer("loki", name))
         for name in sorted(os.listdir(os.path.join(ANSWERS, "loki")))],
        [("", answer("forgejo-runner", "doc-jobs.json"))],
        [(aggregator, answer("datadog", name))
         for aggregator in ["", "max", "average"]
         for name in sorted(os.listdir(os.path.join(ANSWERS, "datadog")))],
        [("SELECT count(*) FROM Transaction", answer("new-relic", name))
         for name in sorted(os.listdir(os.path.join(ANSWERS, "new-relic")))],
        [("", answer("dynatrace", "doc-metrics.json"))],
        [("", answer("dynatrace", "doc-execute.json")), ("", answer("dynatrace", "doc-poll.json"))],
        [("count", answer("splunk", "doc-export.json"))],
        [("", answer("solr", "doc-select.json"))],
        [("", answer("couchdb", "doc-find.json"))],
        [],  # aws-kinesis-stream summary: no recorded answers yet
        [],  # aws-dynamodb-streams: no recorded answers yet
        [],  # solace-event-queue: no recorded answers yet
        [("chrome", answer("selenium-grid", "doc-graphql.json")),
         ("firefox", answer("selenium-grid", "doc-graphql.json"))],
        [("", answer("artemis-queue", "doc-read.json")),
         ("", answer("artemis-queue", "doc-not-found.json"))],
        [("example_topic,example_channel", answer("nsq", "doc-stats.json")),
         ("example_topic,example_channel", answer("nsq", "doc-lookup.json"))],
        [("sub1", answer("pulsar", "doc-stats.json")), ("sub2", answer("pulsar", "doc-stats.json"))],
        [("", answer("arangodb", "doc-cursor.json"))],
        [("golang,gpu", answer("github-runner", "doc-jobs.json")),
         ("", answer("github-runner", "doc-runs.json")),
         ("", answer("github-runner", "doc-repos.json")),
         ("", answer("github-runner", "doc-installation-token.json"))],
        [("A", answer("sumologic", "doc-metrics-query.json")),
         ("_count", answer("sumologic", "doc-records.json")),
         ("", answer("sumologic", "doc-job-status.json"))],
        [("", answer("solarwinds", "doc-measurements.json"))],
        [("", answer("splunk-observability", "doc-execute.txt"))],
        [("", answer("datadog-cluster-agent", "doc-external-metric-value-list.json"))],
        [("", answer("gcp-monitoring", name))
         for name in sorted(os.listdir(os.path.join(ANSWERS, "gcp-monitoring")))],
        [("Average", answer("azure-monitor", "doc-metrics-list.json")),
         ("Total", answer("azure-monitor", "doc-metrics-list.json")),
         ("", answer("azure-monitor", "doc-arm-error.json"))],
        [("", answer("azure-log-analytics", "doc-query.json")),
         ("", answer("azure-log-analytics", "doc-query-count.json"))],
        [("requests/count sum", answer("azure-app-insights", "doc-metrics-get.json"))],
        [("", answer("azure-data-explorer", "doc-v2-frames.json")),
         ("", answer("azure-data-explorer", "doc-v1-tables.json"))],
        [("", answer("azure-servicebus", name))
         for name in sorted(os.listdir(os.path.join(ANSWERS, "azure-servicebus")))],
        [("", answer("azure-eventhub", "doc-hub.xml")),
         ("", answer("azure-eventhub", "doc-partition.xml")),
         ("goSdk", answer("azure-eventhub", "doc-checkpoint-gosdk.json")),
         ("", answer("azure-eventhub", "doc-checkpoint-function.json"))],
        [("maven,java", answer("azure-pipelines", "doc-jobrequests.json")),
         ("linux-agents", answer("azure-pipelines", "doc-pools.json"))],
        [("", answer("gcp-storage", name))
         for name in sorted(os.listdir(os.path.join(ANSWERS, "gcp-storage")))],
        [(region, answer("openstack", name))
         for region in ["", "RegionOne"]
         for name in sorted(os.listdir(os.path.join(ANSWERS, "openstack")))],
        [("", answer("ibmmq", name))
         for name in sorted(os.listdir(os.path.join(ANSWERS, "ibmmq")))],
        [("default", answer("solace-dm", name))
         for name in sorted(os.listdir(os.path.join(ANSWERS, "solace-dm")))],
        [("", answer("gcp-service-account", name))
         for name in sorted(os.listdir(os.path.join(ANSWERS, "gcp-service-account")))],
        [("keda_rs.answers.*", answer("graphite", name))
         for name in sorted(os.listdir(os.path.join(ANSWERS, "graphite")))],
        [("", answer("clickhouse", name))
         for name in sorted(os.listdir(os.path.join(ANSWERS, "clickhouse")))],
        [("", answer("elastic-forecast", name))
         for name in sorted(os.listdir(os.path.join(ANSWERS, "elastic-forecast")))],
        [("average", answer("huawei-cloudeye", name))
         for name in sorted(os.listdir(os.path.join(ANSWERS, "huawei-cloudeye")))],
        [('sum(up{job="prometheus"})', answer("predictkube", name))
         for name in sorted(os.listdir(os.path.join(ANSWERS, "predictkube")))],
    ]


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    connect_seeds = []
    for path in sorted(glob.glob(os.path.join(ROOT, "fuzz", "regressions", "*", "*"))):
        with open(path, "rb") as f:
            write(os.path.basename(os.path.dirname(path)), f.read())
    formulas = set()
    crons = set()
    parsed = []
    for text in documents():
        write("validation", text)
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError:
            continue
        if isinstance(doc, dict):
            parsed.append(doc)
            write("validation", json.dumps(doc))
    # Auth params a TriggerAuthentication of the same examples provides.
    auth = set()
    for doc in parsed:
        if doc.get("kind") in ("TriggerAuthentication", "ClusterTriggerAuthentication"):
            for ref in (doc.get("spec") or {}).get("secretTargetRef") or []:
                auth.add(ref.get("parameter", ""))
    for doc in parsed:
        spec = doc.get("spec") or {}
        if not isinstance(spec, dict):
            continue
        triggers = spec.get("triggers") or []
        for t in triggers if isinstance(triggers, list) else []:
            if not isinstance(t, dict):
                continue
            write("scaler_metadata", trigger_text(t, []))
            connect_seeds.append(trigger_text(t, []))
            if t.get("authenticationRef"):
                write("scaler_metadata", trigger_text(t, sorted(a for a in auth if a)))
            if t.get("type") == "cron":
                md = t.get("metadata") or {}
                for key in ("start", "end"):
                    if key in md:
                        crons.add(f"{md[key]}\n{md.get('timezone', 'UTC')}")
        formula = (((spec.get("advanced") or {}).get("scalingModifiers")) or {}).get("formula")
        if formula:
            formulas.add(formula)
    # Every parameter of every type, by position (`%N`), for types no example shows.
    for n in range(40):
        write("scaler_metadata", f"%{n}\n%0=1\n%1=2\n%2=3\n%3=4\n%4=5")

    with open(os.path.join(ROOT, "api/src/formula/tests.rs")) as f:
        tests = f.read()
    for m in re.finditer(r'^\s*\("((?:[^"\\]|\\.)*)", \[', tests, re.M):
        formulas.add(m.group(1).encode().decode("unicode_escape"))
    formulas |= {
        "max(map([1,2,3,4,5,6,7,8], count([1,2,3,4,5,6,7,8], # > 2)))",
        "len(filter(map([a, b, c], # * 2), # > 1)) ?? 0",
        "[[1, [2, [3]]], a] == [[1, [2, [3]]], b] ? 1 : 0",
        "a in map([1, 2, 3], [#, #]) ? 1 : nil",
        "0x1F + 1_000 + .5 + 2e3 - a % 3 ** 2",
    }
    for formula in sorted(formulas):
        write("formula", formula)
        write("formula", formula.encode() + b"\0" + struct.pack("<ddd", 2.0, -0.0, float("nan")))

    crons |= {
        "*/15 * * * *\nEurope/Amsterdam",
        "30 2 * * 0\nAmerica/New_York\n1762000000",
        "0 0 29 2 *\nUTC",
        "0 0 30 2 *\nUTC",
        "@daily\nAsia/Kolkata",
        "5-59/15 8-18 ? JAN-DEC MON-FRI\nAustralia/Lord_Howe",
        "0,30 */2 1,15 * SUN\nPacific/Chatham\n-62135596800",
    }
    for cron in sorted(crons):
        write("cron", cron)

    requests = [
        b"GET / HTTP/1.1\r\nHost: ready.test\r\n\r\n",
        b"GET /v1/items?id=7 HTTP/1.1\r\nHost: api.test\r\nConnection: keep-alive, X-Hop\r\n"
        b"X-Hop: 1\r\nX-Forwarded-For: 203.0.113.7\r\nX-Forwarded-For: 198.51.100.1\r\n"
        b"Content-Length: 0\r\n\r\n",
        b"HEAD /x HTTP/1.1\r\nhost: held.test\r\nconnection: close\r\n\r\n",
        b"POST /x HTTP/1.1\r\nHost: ready.test\r\nContent-Length: 4\r\n\r\nping",
        b"POST /x HTTP/1.1\r\nHost: ready.test\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nping\r\n0\r\n\r\n",
        b"GET /ws HTTP/1.1\r\nHost: ready.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
        b"PUT /x HTTP/1.1\r\nHost: ready.test\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi",
        b"GET /x HTTP/1.0\r\nHost: ready.test\r\n\r\n",
        b"GET http://ready.test/x HTTP/1.1\r\nHost: other.test\r\n\r\n",
        b"OPTIONS * HTTP/1.1\r\nHost: ready.test\r\n\r\n",
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        b"GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        b"GET /x HTTP/1.1\r\nHost: nowhere.test\r\nTE: trailers\r\nKeep-Alive: 5\r\n\r\n",
        b"DELETE /x HTTP/1.1\r\nhost: ready.test\r\nx-forwarded-host: b\r\nx-forwarded-proto: https\r\n\r\n",
    ]
    for r in requests:
        write("request_head", r)
    write("request_head", b"".join(requests[:3]))
    answers = [
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=1\r\nhello\r\n0\r\nX-T: 1\r\n\r\n",
        b"HTTP/1.1 204 No Content\r\n\r\n",
        b"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end",
        b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
        b"HTTP/1.0 200 OK\r\n\r\nold",
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\ncut short",
        b"garbage\r\n\r\n",
    ]
    for i, answer in enumerate(answers):
        for j, r in enumerate(requests):
            if (i + j) % 3 == 0:
                write("front", bytes([(i * 37 + j * 11) % 256]) + struct.pack("<H", len(answer)) + answer + r)
    write("front", b"\xff" + struct.pack("<H", len(answers[0])) + answers[0] + b"".join(requests[:2]) + requests[12])
    write("front", b"\x00\x00\x00" + requests[0] * 3)


    # scaler_connect: every example trigger as written (its names do not resolve in the
    # target's network namespace) and pointed at loopback, where the fake servers answer what
    # a source of its type answers; and every registered type by position.
    answers = connect_answers()
    for text in sorted(set(connect_seeds)):
        trigger_type = text.split("\n", 1)[0]
        write("scaler_connect", text)
        write("scaler_connect", loopback(text).encode() + b"\0" + answers.get(trigger_type, b""))
    for n in range(40):
        write("scaler_connect", f"%{n}\n%0=127.0.0.1:6379\n%1=2\n%2=3")

    for index, seeds in enumerate(parser_seeds()):
        for param, body in seeds:
            write("response_parsers", bytes([index]) + param.encode() + b"\n" + body)

    for selector in [
        "scaledobject.keda.sh/name=web",
        "scaledobject.keda.sh/name==web,app=shop",
        "app in (a,b), scaledobject.keda.sh/name in (web)",
        "scaledobject.keda.sh/name in (a,b)",
        "scaledobject.keda.sh/name notin (web)",
        "!scaledobject.keda.sh/name",
        "scaledobject.keda.sh/name",
        "team!=x,scaledobject.keda.sh/name = web ",
    ]:
        write("metrics_selector", selector)

    headers = "X-Remote-User: system:kube-controller-manager\nX-Remote-Group: system:masters\n" \
        "X-Remote-Group: system:authenticated\nX-Remote-Extra-Scopes: a\nX-Remote-Extra-Acme.com%2Fproject: p\n"
    for choice in range(10):
        write("metrics_auth", bytes([choice if choice < 5 else 0x80 | (choice - 5)]) + headers.encode())
    write("metrics_auth", b"\x01cm.requestheader-username-headers=[\"X-Who\"]\n"
          b"cm.requestheader-group-headers=[\"X-Groups\", \"X-More\"]\n"
          b"cm.requestheader-extra-headers-prefix=[\"X-Extra-\"]\nX-Who: alice\nX-Groups: g\nX-Extra-K: v\n")
    write("metrics_auth", b"\x81cm.requestheader-allowed-names=[\"aggregator\"] trailing\nX-Remote-User: bob\n")
    write("metrics_auth", b"\x04der=3082010a\nX-Remote-User: eve\n")

    paths = ["ScaledObject", "ScaledJob", "TriggerAuthentication", "ClusterTriggerAuthentication",
             "CloudEventSource", "ClusterCloudEventSource"]
    for doc in parsed:
        kind = doc.get("kind")
        if kind not in paths:
            continue
        for operation, old in (("CREATE", None), ("UPDATE", doc), ("DELETE", None)):
            review = {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {
                    "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                    "kind": {"group": "keda.sh", "version": "v1alpha1", "kind": kind},
                    "resource": {"group": "keda.sh", "version": "v1alpha1", "resource": kind.lower() + "s"},
                    "name": (doc.get("metadata") or {}).get("name", ""),
                    "namespace": (doc.get("metadata") or {}).get("namespace", "default"),
                    "operation": operation,
                    "userInfo": {"username": "admin"},
                    "object": doc if operation != "DELETE" else None,
                    "oldObject": old,
                    "dryRun": False,
                },
            }
            write("admission_review", bytes([paths.index(kind)]) + json.dumps(review).encode())


main()
