#!/usr/bin/env bash
# Records real answers of the event sources of scripts/services.sh (running on loopback) into
# fuzz/answers/<source>/, the seeds of the `response_parsers` and `scaler_connect` fuzz targets
# (fuzz/seeds.py reads them). The answers are committed; rerun after a service's version
# changes. Sources with no local server (Azure Storage's XML with shared-key signing, OAuth2
# token endpoints) have answers copied from their documentation in fuzz/answers/*/doc-*.
set -euo pipefail
cd "$(dirname "$0")/answers"

get() { # get DIR NAME CURL-ARGS...: the body of one answer
  local dir=$1 name=$2
  shift 2
  mkdir -p "$dir"
  curl -sS -m 10 "$@" | head -c 8000 >"$dir/$name"
}

P=http://127.0.0.1:9090/api/v1/query
get prometheus vector.json "$P" --data-urlencode 'query=vector(3)'
get prometheus scalar.json "$P" --data-urlencode 'query=scalar(vector(2.5))'
get prometheus matrix-error.json "$P" --data-urlencode 'query=up[5m]'
get prometheus parse-error.json "$P" --data-urlencode 'query=sum(('
get prometheus series.json "$P" --data-urlencode 'query=prometheus_build_info'
get prometheus-text metrics.txt http://127.0.0.1:9090/metrics
get metrics-api buildinfo.json http://127.0.0.1:9090/api/v1/status/buildinfo
get metrics-api targets.json http://127.0.0.1:9090/api/v1/targets

R=http://127.0.0.1:15672/api
Q=keda-rs-fuzz-answers
curl -sS -m 10 -u guest:guest -X PUT "$R/queues/%2f/$Q" -H 'content-type: application/json' -d '{"durable":false}' >/dev/null
curl -sS -m 10 -u guest:guest -X POST "$R/exchanges/%2f/amq.default/publish" -H 'content-type: application/json' \
  -d "{\"properties\":{},\"routing_key\":\"$Q\",\"payload\":\"x\",\"payload_encoding\":\"string\"}" >/dev/null
sleep 6 # the management statistics are collected every 5 s
get rabbitmq queues.json -u guest:guest "$R/queues?page=1&page_size=100&use_regex=true&name=^$Q\$"
get rabbitmq queue.json -u guest:guest "$R/queues/%2f/$Q"
curl -sS -m 10 -u guest:guest -X DELETE "$R/queues/%2f/$Q" >/dev/null

get nats jsz.json 'http://127.0.0.1:8223/jsz?streams=true&consumers=true&accounts=true'
get nats varz.json 'http://127.0.0.1:8223/varz'

M=http://127.0.0.1:5000/
AUTH='Authorization: AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20260101/us-east-1/sts/aws4_request, SignedHeaders=host, Signature=0'
get aws-sts assume-role.xml -X POST "$M" -H "$AUTH" \
  -d 'Action=AssumeRole&RoleArn=arn:aws:iam::123456789012:role/keda&RoleSessionName=keda&Version=2011-06-15'
get aws-sts error.xml -X POST "$M" -H "$AUTH" -d 'Action=NoSuchAction&Version=2011-06-15'
SQS=(-X POST "$M" -H "${AUTH/sts/sqs}" -H 'content-type: application/x-amz-json-1.0')
URL=$(curl -sS -m 10 "${SQS[@]}" -H 'X-Amz-Target: AmazonSQS.CreateQueue' -d "{\"QueueName\":\"$Q\"}" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["QueueUrl"])')
curl -sS -m 10 "${SQS[@]}" -H 'X-Amz-Target: AmazonSQS.SendMessage' -d "{\"QueueUrl\":\"$URL\",\"MessageBody\":\"x\"}" >/dev/null
get aws-sqs attributes.json "${SQS[@]}" -H 'X-Amz-Target: AmazonSQS.GetQueueAttributes' \
  -d "{\"QueueUrl\":\"$URL\",\"AttributeNames\":[\"ApproximateNumberOfMessages\",\"ApproximateNumberOfMessagesNotVisible\",\"ApproximateNumberOfMessagesDelayed\"]}"
get aws-sqs error.json "${SQS[@]}" -H 'X-Amz-Target: AmazonSQS.GetQueueAttributes' \
  -d '{"QueueUrl":"http://127.0.0.1:5000/123456789012/no-such-queue","AttributeNames":["All"]}'
curl -sS -m 10 "${SQS[@]}" -H 'X-Amz-Target: AmazonSQS.DeleteQueue' -d "{\"QueueUrl\":\"$URL\"}" >/dev/null
NOW=$(date -u +%s)
CW="Action=PutMetricData&Version=2010-08-01&Namespace=KedaFuzz&MetricData.member.1.MetricName=Depth&MetricData.member.1.Value=7"
curl -sS -m 10 -X POST "$M" -H "${AUTH/sts/monitoring}" -d "$CW" >/dev/null
get aws-cloudwatch metric-data.xml -X POST "$M" -H "${AUTH/sts/monitoring}" -d "Action=GetMetricData&Version=2010-08-01\
&MetricDataQueries.member.1.Id=m1&MetricDataQueries.member.1.MetricStat.Metric.Namespace=KedaFuzz\
&MetricDataQueries.member.1.MetricStat.Metric.MetricName=Depth&MetricDataQueries.member.1.MetricStat.Period=60\
&MetricDataQueries.member.1.MetricStat.Stat=Average&StartTime=$(date -u -d @$((NOW - 600)) +%FT%TZ)&EndTime=$(date -u -d @$((NOW + 60)) +%FT%TZ)"

mkdir -p beanstalkd
python3 - <<'PY'
import socket
s = socket.create_connection(("127.0.0.1", 11300), timeout=5)
s.sendall(b"stats-tube default\r\n")
data = b""
while not data.endswith(b"\r\n") or data.count(b"\r\n") < 2:
    data += s.recv(4096)
open("beanstalkd/stats-tube.yaml", "wb").write(data.split(b"\r\n", 1)[1].rsplit(b"\r\n", 1)[0])
PY

mkdir -p postgresql
for value in 123.45 -0.0001 1e30 0 'NaN'; do
  psql -h 127.0.0.1 -U postgres -d test -Atc "COPY (SELECT '$value'::numeric) TO STDOUT (FORMAT binary)" |
    python3 -c '
import struct, sys
data = sys.stdin.buffer.read()
at = 11 + 4 + 4 + struct.unpack(">I", data[15:19])[0]  # signature, flags, extension length and area
length, = struct.unpack(">i", data[at + 2:at + 6])
sys.stdout.buffer.write(data[at + 6:at + 6 + length])' >"postgresql/numeric-$value"
done

# graphite-web's render API (scripts/services.sh: carbon 2003, graphite-web 8089): a short
# window of one series (values and nulls), no series, two series, all nulls.
now=$(date +%s)
printf 'keda_rs.answers.a 4 %s\nkeda_rs.answers.a 7.5 %s\nkeda_rs.answers.b 1 %s\n' \
  $((now - 8)) $((now - 4)) $((now - 4)) >/dev/tcp/127.0.0.1/2003
sleep 2
R=http://127.0.0.1:8089/render
get graphite one-series.json "$R" -G --data-urlencode 'target=keda_rs.answers.a' -d from=-10s -d format=json
get graphite no-series.json "$R" -G --data-urlencode 'target=keda_rs.answers.none' -d from=-10s -d format=json
get graphite two-series.json "$R" -G --data-urlencode 'target=keda_rs.answers.*' -d from=-10s -d format=json
get graphite all-null.json "$R" -G --data-urlencode 'target=removeAboveValue(keda_rs.answers.a,1)' -d from=-10s -d format=json

# ClickHouse's HTTP interface (scripts/services.sh: 127.0.0.1:8123, user keda) as the
# clickhouse scaler asks it: JSONCompact answers of a quoted UInt64, a float, no row, NULL,
# and an error answer.
C="http://127.0.0.1:8123/?default_format=JSONCompact"
get clickhouse count.json "$C" -u keda:keda-test-pw --data-binary 'SELECT count() FROM system.one'
get clickhouse float.json "$C" -u keda:keda-test-pw --data-binary 'SELECT 2.5 AS v, 7 AS w'
get clickhouse no-row.json "$C" -u keda:keda-test-pw --data-binary 'SELECT 1 WHERE 0'
get clickhouse null.json "$C" -u keda:keda-test-pw --data-binary 'SELECT NULL'
get clickhouse error-unknown-table.txt "$C" -u keda:keda-test-pw --data-binary 'SELECT count() FROM keda_rs_no_such_table'

# Prometheus range queries (scripts/services.sh: 127.0.0.1:9090) as the predictkube scaler asks
# them (a form POST to /api/v1/query_range): a matrix of one series, of two series, an empty
# matrix, NaN samples, more points than Prometheus allows, and a parse error.
P=http://127.0.0.1:9090/api/v1/query_range
end=$(date +%s)
range() { echo "start=$((end - $1))&end=$end&step=$2"; }
get predictkube one-series.json "$P" --data-urlencode 'query=sum(up{job="prometheus"})' -d "$(range 300 30)"
get predictkube two-series.json "$P" --data-urlencode 'query=label_replace(vector(1), "a", "x", "", "") or label_replace(vector(2.5), "a", "y", "", "")' -d "$(range 120 60)"
get predictkube empty.json "$P" --data-urlencode 'query=up{job="keda-rs-no-such-job"}' -d "$(range 120 60)"
get predictkube nan.json "$P" --data-urlencode 'query=vector(NaN)' -d "$(range 120 60)"
get predictkube too-many-points.json "$P" --data-urlencode 'query=vector(1)' -d "$(range 1209600 60)"
get predictkube parse-error.json "$P" --data-urlencode 'query=sum(' -d "$(range 120 60)"
