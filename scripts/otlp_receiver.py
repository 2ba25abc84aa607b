#!/usr/bin/env python3
"""A real OTLP metrics receiver for the keda-rs tests (operator/tests/otel.rs).

It decodes what it receives with the OpenTelemetry project's own generated protobuf classes
(the PyPI package `opentelemetry-proto`, installed by scripts/services.sh), so a request our
exporter encodes wrongly is refused here exactly as a collector would refuse it.

  POST /v1/metrics (or any path), Content-Type application/x-protobuf, optionally
  Content-Encoding gzip: the body is parsed as ExportMetricsServiceRequest; the answer is an
  empty ExportMetricsServiceResponse (200), or 400/415 when it cannot be parsed.

  With --grpc-port (needs the PyPI package grpcio): the OTLP/gRPC MetricsService too.

Every request is printed to stdout as one JSON line:
  {"transport": "http"|"grpc", "path": ..., "headers": {...}, "encoding": ...,
   "request": <the ExportMetricsServiceRequest as protobuf's JSON mapping>}
or {"transport": ..., "error": "..."} for a refused one. The first line is
  {"listening": <http port>, "grpc": <grpc port or null>}
"""

import argparse
import gzip
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2

LOCK = threading.Lock()


def emit(record):
    with LOCK:
        sys.stdout.write(json.dumps(record, sort_keys=True) + "\n")
        sys.stdout.flush()


def as_json(request):
    return json_format.MessageToDict(request, preserving_proto_field_name=False)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet: stdout is the record stream
        pass

    def refuse(self, status, error):
        emit({"transport": "http", "path": self.path, "error": error})
        body = error.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if content_type != "application/x-protobuf":
            return self.refuse(415, "unsupported content type %r" % content_type)
        encoding = (self.headers.get("Content-Encoding") or "").strip()
        if encoding == "gzip":
            try:
                body = gzip.decompress(body)
            except OSError as e:
                return self.refuse(400, "bad gzip body: %s" % e)
        elif encoding:
            return self.refuse(415, "unsupported content encoding %r" % encoding)
        request = metrics_service_pb2.ExportMetricsServiceRequest()
        try:
            request.ParseFromString(body)
        except DecodeError as e:
            return self.refuse(400, "not an ExportMetricsServiceRequest: %s" % e)
        emit({
            "transport": "http",
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "encoding": encoding or None,
            "request": as_json(request),
        })
        answer = metrics_service_pb2.ExportMetricsServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


def serve_grpc(port):
    from concurrent import futures

    import grpc
    from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc

    class Service(metrics_service_pb2_grpc.MetricsServiceServicer):
        def Export(self, request, context):
            emit({
                "transport": "grpc",
                "path": "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
                "headers": {k: v for k, v in context.invocation_metadata()},
                "encoding": None,
                "request": as_json(request),
            })
            return metrics_service_pb2.ExportMetricsServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Service(), server)
    bound = server.add_insecure_port("127.0.0.1:%d" % port)
    server.start()
    return server, bound


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="HTTP port (0: any free one)")
    parser.add_argument("--grpc-port", type=int, default=None,
                        help="also serve OTLP/gRPC on this port (0: any free one)")
    args = parser.parse_args()
    httpd = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    grpc_port = None
    grpc_server = None
    if args.grpc_port is not None:
        grpc_server, grpc_port = serve_grpc(args.grpc_port)
    emit({"listening": httpd.server_address[1], "grpc": grpc_port})
    try:
        httpd.serve_forever()
    finally:
        if grpc_server is not None:
            grpc_server.stop(0)


if __name__ == "__main__":
    main()
