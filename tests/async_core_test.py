"""The serving core holds no thread for a request that waits (issue 53), tested over real sockets.

  /usr/bin/python3 tests/async_core_test.py RANKD_BINARY SOURCE_DIR

The server runs with two HTTP workers and two gRPC completion-queue threads, and DIN batched on one
executor. A frontend thread runs a request itself only when the model is idle (nothing queued or
running); were a request waiting for its batch to hold its frontend thread, at most two requests per
protocol could be queued at a time and about every second request would run alone. Instead many requests are
sent at once (gRPC calls from one client thread, HTTP requests on many connections before any
answer is read): they queue together and run merged, every answer equals the unbatched one, and
the server's thread count does not grow with the requests in flight (a thousand gRPC calls at once
add none). Past a batched model's capacity its standing queue refuses new requests (StandingQueueTest).
A server stopped with more queued than its exit timeout lets run answers every request (StopTest).
"""
import collections
import http.client
import json
import os
import random
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
import unittest

from serving_harness import ZOO, Server, enable_batching, grpc_stubs, random_din_request, scrape

BATCHED = '{model="din_batched",version="1"}'


def thread_count(pid):
    return len(os.listdir("/proc/%d/task" % pid))


def scores_alone(server, bodies):
    """Each body's scores from DIN, sent one at a time: what every answer under load must equal."""
    want = []
    for body in bodies:
        status, answer = server.json("POST", "/v2/models/din/infer", body)
        assert status == 200, answer
        want.append(answer["outputs"][0]["data"])
    return want


def same_scores(got, want):
    """Whether DIN's scores match the unbatched ones as the other tests here compare them (within
    1e-6): a merged batch's products may sum in another order than a lone request's (the CPU's
    sgemm splits its work by the rows it is given), which moves a score by rounding."""
    return len(got) == len(want) and all(abs(a - b) <= 1e-6 for a, b in zip(got, want))


def din_proto(pb, body, model="din_batched"):
    req = pb.ModelInferRequest(model_name=model, id=body["id"])
    for i in body["inputs"]:
        t = req.inputs.add(name=i["name"], datatype=i["datatype"])
        t.shape.extend(i["shape"])
        if "parameters" in i:
            t.parameters["lengths"].string_param = ",".join(map(str, i["parameters"]["lengths"]))
        req.raw_input_contents.append(struct.pack("<%dq" % len(i["data"]), *i["data"]))
    return req


def grpc_or_skip(test):
    """The grpc module and the KServe stubs (pb, pb_grpc), or `test` skipped where they are not installed."""
    stubs = grpc_stubs()
    if stubs is None:
        test.skipTest("python3-grpcio / python3-grpc-tools not installed")
    import grpc
    return (grpc,) + stubs


class AsyncCoreTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.repo = tempfile.mkdtemp()
        shutil.copytree(os.path.join(ZOO, "din"), os.path.join(cls.repo, "din"))

        def din_as(name):
            path = os.path.join(cls.repo, name)
            shutil.copytree(os.path.join(ZOO, "din"), path)
            with open(os.path.join(path, "config.yaml")) as f:
                config = f.read().replace("name: din", "name: " + name)
            with open(os.path.join(path, "config.yaml"), "w") as f:
                f.write(config)
            return path

        batched = din_as("din_batched")
        enable_batching(din_as("din_alone"), "enabled: false")
        # Costs given (a measured fit may rightly run each request alone); a budget that takes them all.
        enable_batching(batched, "max_queue_delay_microseconds: 20000, executors: 1, cost_per_row: 1, "
                                 "cost_per_sequence_element: 0, cost_per_request: 10, cost_budget: 1000000, "
                                 "max_queue_wait_microseconds: 0")
        # These tests queue many calls on purpose: long --grpc-max-queue-ms and --http-max-queue-ms,
        # and no bound on the batcher's queue wait (under ASan on 2 busy cores the automatic one
        # refused a request of 96 queued at once), keep them all (OverloadTest and
        # StandingQueueTest have the refusals).
        # One OpenMP thread: a frontend thread that runs a request on the CPU backend would start
        # a team of OpenMP threads of its own the first time, which is not what is counted here.
        cls.server = Server(cls.repo, "--http-threads", "2", "--grpc-threads", "2", "--grpc-max-queue-ms", "600000",
                            "--http-max-queue-ms", "600000", env=dict(os.environ, OMP_NUM_THREADS="1"))
        rng = random.Random(53)
        cls.requests = [random_din_request(rng, rng.randint(100, 200), rng.randint(0, 20)) for _ in range(96)]
        for k, r in enumerate(cls.requests):
            r["id"] = "r%d" % k
        cls.want = scores_alone(cls.server, cls.requests)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.repo)

    def blocker(self):
        """Starts a request the model runs for a tenth of a second or more (32,768 candidates) and
        returns once it should be running, so that requests sent next queue behind it whatever the
        pace of their sending: its bytes go as raw contents over gRPC where the client library is
        installed (read in milliseconds; then 50 ms allowed for that), else as JSON over HTTP (1.5 MB
        that take the server tens of milliseconds to parse; then 400 ms allowed). Returns a function
        that waits for its answer and checks it."""
        body = dict(random_din_request(random.Random(5), 32768, 20), id="blocker")
        stubs = grpc_stubs()
        if stubs is not None:
            import grpc
            pb, pb_grpc = stubs
            channel = grpc.insecure_channel("127.0.0.1:%d" % self.server.grpc_port)
            future = pb_grpc.GRPCInferenceServiceStub(channel).ModelInfer.future(din_proto(pb, body), timeout=120)
            time.sleep(0.05)

            def answered():
                self.assertEqual(future.result().id, "blocker")
                channel.close()
            return answered
        message = json.dumps(body).encode()
        sock = socket.create_connection(("127.0.0.1", self.server.http_port), timeout=120)
        sock.sendall(b"POST /v2/models/din_batched/infer HTTP/1.1\r\nHost: rankd\r\n"
                     b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(message) + message)
        time.sleep(0.4)

        def answered():
            response = http.client.HTTPResponse(sock)
            response.begin()
            data = response.read()
            sock.close()
            self.assertEqual(response.status, 200, data)
            self.assertEqual(json.loads(data)["id"], "blocker")
        return answered

    def merged(self, send, blockers=0):
        """Runs `send` (which returns the scores per request, sampling the thread count while the
        requests are in flight) and checks the answers, the thread count and the merging; `blockers`:
        requests `send` makes besides self.requests, whose answers it does not return."""
        before = scrape(self.server)
        idle_threads = thread_count(self.server.proc.pid)
        scores, busy_threads = send()
        after = scrape(self.server)
        for k, got in enumerate(scores):
            self.assertEqual(len(got), len(self.want[k]))
            for a, b in zip(got, self.want[k]):
                self.assertAlmostEqual(a, b, delta=1e-6)
        self.assertLessEqual(busy_threads, idle_threads + 4)
        delta = lambda name: after.get(name + BATCHED, 0) - before.get(name + BATCHED, 0)
        requests, executions = delta("nv_inference_request_success"), delta("nv_inference_exec_count")
        print("%d requests in %d executions; %d threads idle, %d with requests in flight"
              % (requests, executions, idle_threads, busy_threads), file=sys.stderr)
        self.assertEqual(requests, len(self.requests) + blockers)
        # Two frontend threads that waited for each request would give an execution per two requests.
        self.assertLess(executions, requests / 4, "requests did not queue together")

    def test_grpc_calls_from_one_thread_queue_together(self):
        grpc, pb, pb_grpc = grpc_or_skip(self)
        # The calls serialised first, then sent back to back while the blocker runs (serialising
        # each between sends, with no blocker, once spread them over 35 executions of 96 on a busy
        # 2-core CI machine).
        payloads = [din_proto(pb, r).SerializeToString() for r in self.requests]
        with grpc.insecure_channel("127.0.0.1:%d" % self.server.grpc_port) as channel:
            stub = pb_grpc.GRPCInferenceServiceStub(channel)
            stub.ServerLive(pb.ServerLiveRequest(), timeout=30)
            infer = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer",
                                        response_deserializer=pb.ModelInferResponse.FromString)

            def send():
                blocked = self.blocker()
                futures = [infer.future(p, timeout=60) for p in payloads]
                busy = thread_count(self.server.proc.pid)
                blocked()
                scores = []
                for f in futures:
                    raw = f.result().raw_output_contents[0]
                    scores.append(struct.unpack("<%df" % (len(raw) // 4), raw))
                return scores, busy

            self.merged(send, blockers=1)

    def test_a_thousand_grpc_calls_in_flight_add_no_threads(self):
        grpc, pb, pb_grpc = grpc_or_skip(self)
        rng = random.Random(7)
        small = []
        for k in range(1000):
            r = random_din_request(rng, 1, rng.randint(0, 5))
            r["id"] = "s%d" % k
            small.append(din_proto(pb, r))
        with grpc.insecure_channel("127.0.0.1:%d" % self.server.grpc_port) as channel:
            stub = pb_grpc.GRPCInferenceServiceStub(channel)
            stub.ServerLive(pb.ServerLiveRequest(), timeout=30)
            idle = thread_count(self.server.proc.pid)
            futures = [stub.ModelInfer.future(p, timeout=120) for p in small]
            busy = [thread_count(self.server.proc.pid)]
            for k, f in enumerate(futures):
                self.assertEqual(f.result().id, "s%d" % k)
                if k % 250 == 0:
                    busy.append(thread_count(self.server.proc.pid))
        print("1000 calls: %d threads idle, at most %d in flight" % (idle, max(busy)), file=sys.stderr)
        self.assertLessEqual(max(busy), idle + 4)  # "within a few": gRPC's own pool may start one or two

    def test_http_requests_on_many_connections_queue_together(self):
        # The messages made and the connections opened first, then the requests sent back to back
        # while the blocker runs (making each between sends, with no blocker, spread them wider than
        # the queue delay on a busy machine: 96 requests in up to 33 executions).
        messages = [b"POST /v2/models/din_batched/infer HTTP/1.1\r\nHost: rankd\r\n"
                    b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body
                    for body in (json.dumps(r).encode() for r in self.requests)]

        def send():
            socks = [socket.create_connection(("127.0.0.1", self.server.http_port), timeout=60) for _ in messages]
            blocked = self.blocker()
            for s, message in zip(socks, messages):
                s.sendall(message)
            busy = thread_count(self.server.proc.pid)
            blocked()
            scores = []
            for s in socks:
                response = http.client.HTTPResponse(s)
                response.begin()
                data = response.read()
                s.close()
                self.assertEqual(response.status, 200, data)
                scores.append(json.loads(data)["outputs"][0]["data"])
            return scores, busy

        self.merged(send, blockers=1)

    def switches(self, name):
        """The server's threads named `name`: how many, and the times they went to sleep (voluntary
        context switches; being preempted by other processes' work is not counted)."""
        count = switches = 0
        tasks = "/proc/%d/task" % self.server.proc.pid
        for task in os.listdir(tasks):
            try:
                with open(os.path.join(tasks, task, "comm")) as f:
                    if f.read().strip() != name:
                        continue
                with open(os.path.join(tasks, task, "status")) as f:
                    switches += sum(int(l.split()[1]) for l in f if l.startswith("voluntary_ctxt_switches"))
                count += 1
            except FileNotFoundError:
                continue
        return count, switches

    def test_http_inference_for_a_batching_model_wakes_no_worker(self):
        # Parsed and queued by the I/O thread that read it, such a request leaves HTTP's workers
        # (rankd-httpwork) asleep; a model without batching runs its requests on a worker, each
        # waking one. (The I/O threads' sleeps are printed, not checked: about one a request, the
        # answer sent by the thread that finished the request, but a lock they wait on counts
        # too, and under ASan on a busy machine they slept 2.9 times a request.)
        bodies = [json.dumps(r).encode() for r in self.requests[:20]]
        for model, on_workers in (("din_batched", False), ("din_alone", True)):
            workers, before = self.switches("rankd-httpwork")
            self.assertGreaterEqual(workers, 2)  # --http-threads 2, and the metrics server's one
            io_before = self.switches("rankd-http")[1]
            conn = http.client.HTTPConnection("127.0.0.1", self.server.http_port, timeout=60)
            for k, body in enumerate(bodies):
                conn.request("POST", "/v2/models/%s/infer" % model, body, {"Content-Type": "application/json"})
                response = conn.getresponse()
                data = response.read()
                self.assertEqual(response.status, 200, data)
                self.assertTrue(same_scores(json.loads(data)["outputs"][0]["data"], self.want[k]), model)
            conn.close()
            switched = self.switches("rankd-httpwork")[1] - before
            io_switched = self.switches("rankd-http")[1] - io_before
            print("%s: 20 requests, context switches: HTTP's workers %d, its I/O threads %d"
                  % (model, switched, io_switched), file=sys.stderr)
            if on_workers:
                # about one a request: a worker that has not yet gone back to sleep when the
                # next request comes takes it awake (19 of 20 on CI)
                self.assertGreater(switched, len(bodies) // 2)
            else:
                self.assertLess(switched, len(bodies) // 4)

    def test_grpc_inference_for_a_batching_model_wakes_no_worker(self):
        # A call of at most 64 KiB for a model that batches is parsed and queued by the
        # completion-queue thread that took it, leaving the call queue's workers (rankd-call)
        # asleep; a model without batching runs its calls on a worker, each waking one.
        grpc, pb, pb_grpc = grpc_or_skip(self)
        with grpc.insecure_channel("127.0.0.1:%d" % self.server.grpc_port) as channel:
            stub = pb_grpc.GRPCInferenceServiceStub(channel)
            for model, on_workers in (("din_batched", False), ("din_alone", True)):
                calls = [din_proto(pb, r, model) for r in self.requests[:20]]
                stub.ModelInfer(calls[0], timeout=60)  # the channel connected, the model warm
                workers, before = self.switches("rankd-call")
                self.assertGreaterEqual(workers, 2)  # --grpc-threads 2
                for k, call in enumerate(calls):
                    answer = stub.ModelInfer(call, timeout=60)
                    scores = struct.unpack("<%df" % (len(answer.raw_output_contents[0]) // 4),
                                           answer.raw_output_contents[0])
                    self.assertTrue(same_scores(scores, self.want[k]), model)
                switched = self.switches("rankd-call")[1] - before
                print("%s: 20 gRPC calls, context switches: the call queue's workers %d" % (model, switched),
                      file=sys.stderr)
                if on_workers:
                    self.assertGreater(switched, len(calls) // 2)
                else:
                    self.assertLess(switched, len(calls) // 4)

    def test_an_answer_the_socket_takes_in_part_arrives_whole(self):
        # Six answers of 65,536 candidates (700 KB of JSON each) to a client whose receive buffer
        # is small and that reads nothing until all six are due: on loopback a socket takes about
        # 3 MB unread, so the thread that finishes a request sends what the socket takes and the
        # I/O thread the rest. Each answer arrives whole, in order, equal to the one a plain
        # client gets.
        body = dict(random_din_request(random.Random(7), 65536, 20), id="big")
        status, plain = self.server.json("POST", "/v2/models/din_batched/infer", body)
        self.assertEqual(status, 200, plain)
        message = json.dumps(body).encode()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(120)
        sock.connect(("127.0.0.1", self.server.http_port))
        for _ in range(6):
            sock.sendall(b"POST /v2/models/din_batched/infer HTTP/1.1\r\nHost: rankd\r\n"
                         b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(message) + message)
            time.sleep(0.5)  # answered into the socket meanwhile
        answers = sock.makefile("rb")  # one reader for all (http.client's would read ahead)
        for _ in range(6):
            status = answers.readline()
            length = None
            for line in iter(answers.readline, b"\r\n"):
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            data = answers.read(length)
            self.assertTrue(status.startswith(b"HTTP/1.1 200 "), status + data[:200])
            self.assertEqual(json.loads(data)["outputs"], plain["outputs"])
        sock.close()


class OverloadTest(unittest.TestCase):
    """Past what the server can handle, inference calls are refused unread (gRPC UNAVAILABLE, HTTP
    503, counted) once one has waited --grpc-max-queue-ms / --http-max-queue-ms to be handled; the
    calls handled score as always, and the server serves on. One completion-queue thread and one
    HTTP worker, unbatched DIN requests of 2,048 candidates (milliseconds each on the CPU), forty
    sent at once, 2 ms allowed."""

    @classmethod
    def setUpClass(cls):
        cls.repo = tempfile.mkdtemp()
        shutil.copytree(os.path.join(ZOO, "din"), os.path.join(cls.repo, "din"))
        enable_batching(os.path.join(cls.repo, "din"), "enabled: false")  # calls wait for the handler, not a batch
        cls.server = Server(cls.repo, "--grpc-threads", "1", "--grpc-max-queue-ms", "2", "--http-threads", "1",
                            "--http-max-queue-ms", "2")
        rng = random.Random(153)
        cls.bodies = [dict(random_din_request(rng, 2048, 20), id="b%d" % k) for k in range(4)]
        cls.want = []
        for body in cls.bodies:
            for attempt in range(20):  # a lone request too may wait 2 ms on a loaded machine
                status, answer = cls.server.json("POST", "/v2/models/din/infer", body)
                if status != 503:
                    break
                time.sleep(0.05)
            assert status == 200, answer
            cls.want.append(answer["outputs"][0]["data"])

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.repo)

    def check_burst(self, send_all, serve_one):
        """`send_all()` sends forty calls at once and returns each one's scores, or None where it
        was refused (after checking the refusal); `serve_one()` sends one call and returns whether
        it was refused."""
        before = scrape(self.server).get("rankd_overload_refusals", 0)
        answers = send_all()
        refused = sum(1 for a in answers if a is None)
        for k, got in enumerate(answers):
            if got is None:
                continue
            self.assertEqual(len(got), len(self.want[k % 4]))
            for a, b in zip(got, self.want[k % 4]):
                self.assertAlmostEqual(a, b, delta=1e-6)
        print("40 calls at once: %d answered, %d refused" % (len(answers) - refused, refused), file=sys.stderr)
        self.assertGreater(refused, 0)
        self.assertLess(refused, len(answers))
        self.assertEqual(scrape(self.server).get("rankd_overload_refusals", 0) - before, refused)
        # Serves on. With a 2 ms bound even a lone call can be refused on a loaded machine
        # (sanitizers, tests in parallel): it is answered within a few tries, never failed.
        for attempt in range(20):
            if not serve_one():
                return
            time.sleep(0.05)
        self.fail("20 lone calls after the burst were all refused")

    def test_grpc_calls_past_the_queue_limit_are_refused_and_the_rest_score(self):
        grpc, pb, pb_grpc = grpc_or_skip(self)
        protos = [din_proto(pb, b) for b in self.bodies]
        for p in protos:
            p.model_name = "din"
        with grpc.insecure_channel("127.0.0.1:%d" % self.server.grpc_port) as channel:
            stub = pb_grpc.GRPCInferenceServiceStub(channel)
            stub.ServerLive(pb.ServerLiveRequest(), timeout=30)

            def refusal(e):
                self.assertEqual(e.code(), grpc.StatusCode.UNAVAILABLE, e.details())
                self.assertIn("the server is overloaded", e.details())

            def send_all():
                futures = [stub.ModelInfer.future(protos[k % 4], timeout=120) for k in range(40)]
                answers = []
                for f in futures:
                    try:
                        raw = f.result().raw_output_contents[0]
                    except grpc.RpcError as e:
                        refusal(e)
                        answers.append(None)
                        continue
                    answers.append(struct.unpack("<%df" % (len(raw) // 4), raw))
                return answers

            def serve_one():
                try:
                    self.assertEqual(stub.ModelInfer(protos[0], timeout=60).id, "b0")
                    return False
                except grpc.RpcError as e:
                    refusal(e)
                    return True

            self.check_burst(send_all, serve_one)

    def test_http_requests_past_the_queue_limit_are_refused_and_the_rest_score(self):
        bodies = [json.dumps(b).encode() for b in self.bodies]

        def answer(status, data):
            if status == 503:
                self.assertIn("the server is overloaded", json.loads(data)["error"])
                return None
            self.assertEqual(status, 200, data)
            return json.loads(data)["outputs"][0]["data"]

        def send_all():
            socks = []
            for k in range(40):
                s = socket.create_connection(("127.0.0.1", self.server.http_port), timeout=120)
                s.sendall(b"POST /v2/models/din/infer HTTP/1.1\r\nHost: rankd\r\n"
                          b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(bodies[k % 4]) +
                          bodies[k % 4])
                socks.append(s)
            answers = []
            for s in socks:
                response = http.client.HTTPResponse(s)
                response.begin()
                answers.append(answer(response.status, response.read()))
                s.close()
            return answers

        def serve_one():
            status, data, _ = self.server.request("POST", "/v2/models/din/infer", bodies[0])
            return answer(status, data) is None

        self.check_burst(send_all, serve_one)


class StandingQueueTest(unittest.TestCase):
    """Past a batched model's capacity its queue stands (no batch empties it), and the batcher's
    default bound (no max_queue_wait_microseconds in the config) refuses new requests while the
    queue's head is late: 503 `the queue is behind`, before the request is read (a malformed body
    gets the 503, not its 400); the requests taken score as always, and once the load stops a lone
    request is served. DIN of 2,048 candidates batched two requests at a time
    on one executor (milliseconds each on the CPU), twenty-four clients sending back to back for
    two seconds; the frontends' own bounds are long, so every refusal is the batcher's. (With
    `max_queue_wait_microseconds: 0` in the config nothing is refused and the test fails.)"""

    @classmethod
    def setUpClass(cls):
        cls.repo = tempfile.mkdtemp()
        shutil.copytree(os.path.join(ZOO, "din"), os.path.join(cls.repo, "din"))
        enable_batching(os.path.join(cls.repo, "din"), "max_queue_delay_microseconds: 0, executors: 1, "
                        "cost_per_row: 1, cost_per_sequence_element: 0, cost_per_request: 0, cost_budget: 4096")
        cls.server = Server(cls.repo, "--http-threads", "8", "--http-max-queue-ms", "600000")
        rng = random.Random(55)
        cls.bodies = [dict(random_din_request(rng, 2048, 20), id="s%d" % k) for k in range(4)]
        cls.want = scores_alone(cls.server, cls.bodies)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.repo)

    def test_a_standing_queue_refuses_new_requests_and_the_rest_score(self):
        bodies = [json.dumps(b).encode() for b in self.bodies]
        answered, refused, wrong = [0], [0], []
        lock = threading.Lock()
        stop = time.monotonic() + 2.0

        def client(k):
            conn = http.client.HTTPConnection("127.0.0.1", self.server.http_port, timeout=120)
            while time.monotonic() < stop:
                conn.request("POST", "/v2/models/din/infer", bodies[k % 4], {"Content-Type": "application/json"})
                response = conn.getresponse()
                data = response.read()
                with lock:
                    if response.status == 503 and b"the queue is behind" in data:
                        refused[0] += 1
                    elif response.status != 200:
                        wrong.append((response.status, data[:200]))
                    elif not same_scores(json.loads(data)["outputs"][0]["data"], self.want[k % 4]):
                        wrong.append("client %d: scores differ" % k)
                    else:
                        answered[0] += 1
                k += 1
            conn.close()

        unread = []

        def malformed():
            # A body that is not JSON: read, it would be refused as malformed (400); while the
            # queue stands it is refused before it is read (503).
            conn = http.client.HTTPConnection("127.0.0.1", self.server.http_port, timeout=120)
            while time.monotonic() < stop:
                conn.request("POST", "/v2/models/din/infer", b"{not json", {"Content-Type": "application/json"})
                response = conn.getresponse()
                data = response.read()
                with lock:
                    unread.append(response.status == 503 and b"the queue is behind" in data)
                time.sleep(0.02)
            conn.close()

        threads = [threading.Thread(target=client, args=(k,)) for k in range(24)]
        threads.append(threading.Thread(target=malformed))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print("two seconds of 24 clients: %d answered, %d refused; malformed bodies refused unread: %d of %d"
              % (answered[0], refused[0], sum(unread), len(unread)), file=sys.stderr)
        self.assertGreater(sum(unread), 0, "no malformed body was refused before it was read")
        self.assertEqual(wrong, [])
        self.assertGreater(answered[0], 0)
        self.assertGreater(refused[0], 0, "the queue stood and nothing was refused")
        # The load gone, the queue is empty and a lone request is served at once.
        status, answer = self.server.json("POST", "/v2/models/din/infer", self.bodies[0])
        self.assertEqual(status, 200, answer)
        self.assertTrue(same_scores(answer["outputs"][0]["data"], self.want[0]))

    def test_grpc_calls_to_a_standing_queue_are_refused_by_the_batcher(self):
        # The same over gRPC, calls of 768 candidates: under 64 KiB each, so the completion-queue
        # thread that takes one parses it and queues it to the batcher, past the call queue (whose
        # bound here is long); while the queue stands the batcher refuses them, UNAVAILABLE "the
        # queue is behind", and the calls taken score as always.
        grpc, pb, pb_grpc = grpc_or_skip(self)
        rng = random.Random(56)
        bodies = [dict(random_din_request(rng, 768, 20), id="g%d" % k) for k in range(4)]
        want = scores_alone(self.server, bodies)
        calls = [din_proto(pb, b, "din") for b in bodies]
        self.assertLess(max(c.ByteSize() for c in calls), 64 * 1024)
        answered, refused, wrong = [0], [0], []
        lock = threading.Lock()
        with grpc.insecure_channel("127.0.0.1:%d" % self.server.grpc_port) as channel:
            stub = pb_grpc.GRPCInferenceServiceStub(channel)
            stop = time.monotonic() + 2.0

            def client(k):
                while time.monotonic() < stop:
                    try:
                        answer = stub.ModelInfer(calls[k % 4], timeout=120)
                        raw = answer.raw_output_contents[0]
                        scores = struct.unpack("<%df" % (len(raw) // 4), raw)
                        with lock:
                            if same_scores(scores, want[k % 4]):
                                answered[0] += 1
                            else:
                                wrong.append("client %d: scores differ" % k)
                    except grpc.RpcError as e:
                        with lock:
                            if e.code() == grpc.StatusCode.UNAVAILABLE and "the queue is behind" in e.details():
                                refused[0] += 1
                            else:
                                wrong.append((e.code().name, e.details()[:200]))
                    k += 1

            threads = [threading.Thread(target=client, args=(k,)) for k in range(24)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            print("two seconds of 24 gRPC clients: %d answered, %d refused" % (answered[0], refused[0]),
                  file=sys.stderr)
            self.assertEqual(wrong, [])
            self.assertGreater(answered[0], 0)
            self.assertGreater(refused[0], 0, "the queue stood and nothing was refused")
            answer = stub.ModelInfer(calls[0], timeout=120)  # the load gone, a lone call is served
            raw = answer.raw_output_contents[0]
            self.assertTrue(same_scores(struct.unpack("<%df" % (len(raw) // 4), raw), want[0]))


class StopTest(unittest.TestCase):
    """SIGTERM while more is queued than the exit timeout (1 s) lets run: DIN batched on one
    executor, a request a batch, requests of 65,536 candidates, over HTTP as many as ten seconds' worth
    (at least twenty) and four over gRPC, sent before the signal. The batch running finishes, the requests still queued at the deadline are answered 503 / UNAVAILABLE
    "the server is shutting down" on connections still open, and the server exits 0. (Before, the
    frontends went first and the queue, run as the models were destroyed, answered into them: the
    server died of SIGSEGV and the queued requests' connections closed unanswered.)"""

    def test_a_stop_past_the_exit_timeout_answers_every_request(self):
        repo = tempfile.mkdtemp()
        try:
            shutil.copytree(os.path.join(ZOO, "din"), os.path.join(repo, "din"))
            enable_batching(os.path.join(repo, "din"),
                            "max_queue_delay_microseconds: 0, max_queue_wait_microseconds: 0, executors: 1, "
                            "max_batch_size: 65536")  # one request a batch: twenty take seconds
            server = Server(repo, "--exit-timeout-secs", "1")
            body = dict(random_din_request(random.Random(11), 65536, 20), id="big")
            message = json.dumps(body).encode()
            statuses, lock = [], threading.Lock()

            def http_client():
                conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=120)
                conn.request("POST", "/v2/models/din/infer", message, {"Content-Type": "application/json"})
                response = conn.getresponse()
                data = response.read()
                with lock:
                    statuses.append(("http", response.status, data[:200]))
                conn.close()

            # Enough requests for ten times the one's time alone (which also counts its JSON), whatever the machine.
            for _ in range(2):  # the second one timed: the first one also warms the model up
                began = time.monotonic()
                status, _ = server.json("POST", "/v2/models/din/infer", body)
                self.assertEqual(status, 200)
            alone = max(time.monotonic() - began, 1e-3)
            http_requests = max(20, min(200, int(10.0 / alone) + 1))
            threads = [threading.Thread(target=http_client) for _ in range(http_requests)]
            for t in threads:
                t.start()
            calls, channel = [], None
            stubs = grpc_stubs()
            if stubs:
                import grpc
                pb, pb_grpc = stubs
                channel = grpc.insecure_channel("127.0.0.1:%d" % server.grpc_port)
                stub = pb_grpc.GRPCInferenceServiceStub(channel)
                calls = [stub.ModelInfer.future(din_proto(pb, body, "din"), timeout=120) for _ in range(4)]
            time.sleep(1.5)  # the requests read and queued (some may still be parsed)
            began = time.monotonic()
            code = server.stop(timeout=120)
            stopped_in = time.monotonic() - began
            for t in threads:
                t.join()
            for call in calls:
                try:
                    call.result()
                    statuses.append(("grpc", 200, b""))
                except grpc.RpcError as e:
                    # UNAVAILABLE from the queue; CANCELLED where gRPC's drain ended the call first
                    statuses.append(("grpc", e.code().name, e.details().encode()))
            if channel:
                channel.close()
            print("a request alone %.2f s; stopped in %.1f s: %s" % (
                alone, stopped_in, sorted(collections.Counter((p, str(s)) for p, s, _ in statuses).items())),
                file=sys.stderr)
            self.assertEqual(code, 0, server.output()[-3000:])
            self.assertEqual(len(statuses), http_requests + len(calls))
            def refused(status, data):
                return status in (503, "UNAVAILABLE") and b"the server is shutting down" in data

            for protocol, status, data in statuses:
                if status == 200 or refused(status, data):
                    continue
                # else only gRPC's own end of the calls still open at its drain's deadline
                self.assertEqual(protocol, "grpc", (status, data))
                self.assertTrue(status == "CANCELLED" or (status == "UNAVAILABLE" and data == b"Cancelling all calls"),
                                (status, data))
            self.assertTrue(any(p == "http" and refused(s, d) for p, s, d in statuses),
                            "no HTTP request was left queued at the exit timeout")
        finally:
            shutil.rmtree(repo)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[3:])
