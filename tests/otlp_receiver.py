"""A minimal real OTLP receiver (gRPC and HTTP/protobuf) that records what exporters send."""

from __future__ import annotations

import socket
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Receiver:
    def __init__(self) -> None:
        self.requests: list[trace_service_pb2.ExportTraceServiceRequest] = []
        self.headers: list[dict[str, str]] = []
        self.lock = threading.Lock()

    def record(self, request: trace_service_pb2.ExportTraceServiceRequest, headers: dict[str, str]) -> None:
        with self.lock:
            self.requests.append(request)
            self.headers.append(headers)

    def spans(self) -> list:
        with self.lock:
            return [s for r in self.requests for rs in r.resource_spans for ss in rs.scope_spans for s in ss.spans]


class _Servicer(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, receiver: Receiver) -> None:
        self.receiver = receiver

    def Export(self, request, context):
        self.receiver.record(request, dict(context.invocation_metadata()))
        return trace_service_pb2.ExportTraceServiceResponse()


def start_grpc(receiver: Receiver) -> tuple[grpc.Server, str]:
    port = free_port()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Servicer(receiver), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    return server, f"http://127.0.0.1:{port}"


def start_http(receiver: Receiver) -> tuple[ThreadingHTTPServer, str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            request = trace_service_pb2.ExportTraceServiceRequest()
            request.ParseFromString(body)
            receiver.record(request, {k.lower(): v for k, v in self.headers.items()})
            payload = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"
