"""gunicorn config of bench/embedded_gunicorn.py: one sync worker with djwork embedded, as a user sets it up."""

import os

import djwork.gunicorn

if not os.environ.get("BENCH_STANDALONE"):
    # --standalone: no embedded worker (a separate runworkers process drains), the control case.
    from djwork.gunicorn import *  # noqa: F403 - post_worker_init, worker_exit, pre_request, post_request

bind = os.environ["BENCH_BIND"]
workers = 1
graceful_timeout = 15
loglevel = "warning"
control_socket_disable = True  # gunicorn >= 25: no control socket under $HOME
# BENCH_WORKER_CLASS: e.g. djwork.gunicorn.EmbeddedWorker; gunicorn's sync worker otherwise.
worker_class = os.environ.get("BENCH_WORKER_CLASS") or "sync"

if os.environ.get("BENCH_PROFILE"):
    # --profile: marks along each request's path (bench/request_marks.py), written out at exit.
    from bench import request_marks

    if worker_class == "sync":
        worker_class = "bench.request_marks.ProfiledSyncWorker"
    else:
        module, _, name = worker_class.rpartition(".")
        worker_class = request_marks.profiled(getattr(__import__(module, fromlist=[name]), name))

    def pre_request(worker, req):
        request_marks.mark("pre_request")
        djwork.gunicorn.pre_request(worker, req)  # a no-op without an embedded worker

    def post_request(worker, req, environ=None, resp=None):
        request_marks.mark("post_request")
        djwork.gunicorn.post_request(worker, req, environ, resp)

    def worker_exit(server, worker):
        request_marks.dump()
        djwork.gunicorn.worker_exit(server, worker)

if os.environ.get("BENCH_NICE"):
    # Experiment (--nice N): the embedded worker's threads at a lower OS priority than the request thread.
    import threading

    _post_worker_init = post_worker_init  # noqa: F405

    def post_worker_init(worker):
        _post_worker_init(worker)

        def renice():
            import time

            time.sleep(3)  # after the boot: the processor threads exist
            for thread in threading.enumerate():
                if thread.name.startswith("djwork") and thread.native_id:
                    os.setpriority(os.PRIO_PROCESS, thread.native_id, int(os.environ["BENCH_NICE"]))

        threading.Thread(target=renice, daemon=True).start()
