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


def main():
    shutil.rmtree(OUT, ignore_errors=True)
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


main()
