"""A small fault-injecting TCP proxy for Redis tests: sits on 127.0.0.1 in front of a real server.

Modes switch at runtime, from any thread:

* pass-through (``allow()``);
* ``refuse()``: the listening socket is closed, so a dial gets ECONNREFUSED;
* ``reset_connects()``: connections are accepted and reset at once, so the
  failure surfaces inside redis-py's handshake (still connect phase);
* ``drop_next(command)``: the next matching command is forwarded, its reply
  awaited (so the command provably ran), then both sockets are cut before
  the reply is relayed;
* ``stall_next(command)``: the next matching command is forwarded and its
  reply swallowed, so the client times out reading.

The client side is parsed as RESP arrays, so ``commands`` lists every command
name sent through the proxy (handshakes included), ``count("LPUSH")``
proves how often a command left the client, and ``count("CLIENT", "UNBLOCK")``
counts one subcommand (matched on the first argument).
"""

from __future__ import annotations

import select
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlparse

PASS = "pass"
REFUSE = "refuse"
RESET = "reset"
_TICK = 0.02


def _rst_close(sock: socket.socket) -> None:
    """Close with SO_LINGER 0: the peer gets a RST, not an orderly FIN."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


class _RequestParser:
    """Incremental parser of client->server RESP: yields each complete command's name (upper case)
    and its first argument (as sent; "" if none), e.g. ("EVALSHA", "<sha of fetch.lua>")."""

    def __init__(self) -> None:
        self.buffer = b""

    def feed(self, data: bytes) -> list[tuple[str, str]]:
        self.buffer += data
        commands: list[tuple[str, str]] = []
        while True:
            parsed = self._one()
            if parsed is None:
                return commands
            commands.append(parsed)

    def _one(self) -> tuple[str, str] | None:
        buffer = self.buffer
        end = buffer.find(b"\r\n")
        if end < 0:
            return None
        if not buffer.startswith(b"*"):  # inline command: one line
            self.buffer = buffer[end + 2:]
            words = [word.decode(errors="replace") for word in buffer[:end].split()] + ["", ""]
            return words[0].upper(), words[1]
        count = int(buffer[1:end])
        position = end + 2
        name = argument = ""
        for index in range(count):
            end = buffer.find(b"\r\n", position)
            if end < 0:
                return None
            length = int(buffer[position + 1:end])  # "$<length>"
            start = end + 2
            if len(buffer) < start + length + 2:
                return None
            if index == 0:
                name = buffer[start:start + length].decode(errors="replace").upper()
            elif index == 1:
                argument = buffer[start:start + length].decode(errors="replace")
            position = start + length + 2
        self.buffer = buffer[position:]
        return name, argument


@dataclass
class _Fault:
    kind: str  # "drop" | "stall" | "hold"
    command: str | None
    skip: int
    argument: str | None = None
    fired: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)  # "hold": deliver what was kept back


class FaultProxy:
    """Threaded TCP proxy with switchable faults. Use as a context manager, or start()/stop()."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = 0
        self.commands: list[str] = []
        self.first_arguments: list[str] = []  # the first argument of each of ``commands``, upper case
        self.accepted = 0
        self._mode = PASS
        self._fault: _Fault | None = None
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._listening = False
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._pairs: set[tuple[socket.socket, socket.socket]] = set()

    @classmethod
    def in_front_of(cls, redis_url: str) -> FaultProxy:
        """A proxy (not yet started; use it as a context manager) to the server at ``redis_url``."""
        parsed = urlparse(redis_url)
        return cls(parsed.hostname or "127.0.0.1", parsed.port or 0)

    # --- lifecycle ----------------------------------------------------------
    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> FaultProxy:
        listener = self._bind()
        self.port = listener.getsockname()[1]
        self._listening = True
        self._spawn(self._accept_loop, listener)
        return self

    def stop(self) -> None:
        self._stopping.set()
        with self._changed:
            self._changed.notify_all()
        for thread in list(self._threads):
            thread.join(5)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    # --- switches -----------------------------------------------------------
    def allow(self) -> None:
        """Pass-through: accept and relay (re-opens the listening socket if refuse() closed it)."""
        self._set_mode(PASS)

    def refuse(self) -> None:
        """Close the listening socket: new dials get ECONNREFUSED. Live connections are untouched."""
        self._set_mode(REFUSE)

    def reset_connects(self) -> None:
        """Accept new connections and reset them at once (the handshake fails)."""
        self._set_mode(RESET)

    def drop_next(self, command: str | None = None, *, skip: int = 0,
                  argument: str | None = None) -> threading.Event:
        """Arm a one-shot cut after the next ``command`` (any, if None), letting ``skip`` matches through.

        With ``argument``, only a command whose first argument is exactly that
        matches (one Lua script's EVALSHA among many). The command is forwarded
        and its reply awaited from the server before both sockets are closed,
        so it provably ran but the client never sees the reply. Returns an
        Event set when the fault fired.
        """
        return self._arm("drop", command, skip, argument).fired

    def stall_next(self, command: str | None = None, *, skip: int = 0,
                   argument: str | None = None) -> threading.Event:
        """Arm a one-shot black hole: the command is forwarded, its reply (and all later ones) swallowed.

        ``argument`` as for ``drop_next``."""
        return self._arm("stall", command, skip, argument).fired

    def hold_next(self, command: str | None = None, *, skip: int = 0,
                  argument: str | None = None) -> tuple[threading.Event, threading.Event]:
        """Arm a one-shot hold: the command is forwarded (it runs), and its reply and every later one on that
        connection are kept back until the returned ``release`` is set, then delivered in order: a reply
        made as late as the test wants, not lost. ``argument`` as for ``drop_next``. Returns
        ``(fired, release)``."""
        fault = self._arm("hold", command, skip, argument)
        return fault.fired, fault.release

    def count(self, command: str, argument: str | None = None) -> int:
        """How many ``command`` were sent; with ``argument``, only those whose first argument is that
        (case-insensitive: ``count("CLIENT", "UNBLOCK")``)."""
        command = command.upper()
        with self._lock:
            if argument is None:
                return self.commands.count(command)
            wanted = (command, argument.upper())
            return sum(1 for sent in zip(self.commands, self.first_arguments, strict=True) if sent == wanted)

    def live_connections(self) -> int:
        with self._lock:
            return len(self._pairs)

    def cut_all(self) -> None:
        """Close every proxied connection now (both sides), as a network partition would."""
        with self._lock:
            pairs = list(self._pairs)
        for client, upstream in pairs:
            for sock in (client, upstream):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def wait_idle(self, timeout: float = 2.0) -> bool:
        """Wait until no proxied connection is open (their relay threads have closed both sockets)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.live_connections():
                return True
            time.sleep(_TICK)
        return False

    # --- internals ----------------------------------------------------------
    def _arm(self, kind: str, command: str | None, skip: int, argument: str | None = None) -> _Fault:
        fault = _Fault(kind, command.upper() if command else None, skip, argument)
        with self._lock:
            self._fault = fault
        return fault

    def _set_mode(self, mode: str) -> None:
        # The accept thread owns the listening socket (closing a socket another
        # thread is selecting on is a race), so wait for it to apply the mode.
        with self._changed:
            self._mode = mode
            self._changed.notify_all()
            self._changed.wait_for(lambda: self._listening == (mode != REFUSE) or self._stopping.is_set(), 5)

    def _bind(self) -> socket.socket:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        return listener

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True, name="faultproxy")
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self, listener: socket.socket | None) -> None:
        try:
            while not self._stopping.is_set():
                with self._changed:
                    mode = self._mode
                    if mode == REFUSE and listener is not None:
                        listener.close()
                        listener = None
                    elif mode != REFUSE and listener is None:
                        listener = self._bind()
                    self._listening = listener is not None
                    self._changed.notify_all()
                if listener is None:
                    with self._changed:
                        self._changed.wait(_TICK)
                    continue
                readable, _, _ = select.select([listener], [], [], _TICK)
                if not readable:
                    continue
                try:
                    client, _address = listener.accept()
                except OSError:
                    continue
                with self._lock:
                    self.accepted += 1
                    mode = self._mode
                if mode == RESET:
                    _rst_close(client)
                    continue
                try:
                    upstream = socket.create_connection(self.upstream, timeout=2)
                except OSError:
                    _rst_close(client)
                    continue
                self._spawn(self._relay, client, upstream)
        finally:
            if listener is not None:
                listener.close()
            with self._changed:
                self._listening = False
                self._changed.notify_all()

    def _take_fault(self, commands: list[tuple[str, str]]) -> _Fault | None:
        """The armed fault, if one of ``commands`` (this chunk's) triggers it; disarms it."""
        with self._lock:
            self.commands.extend(name for name, _argument in commands)
            self.first_arguments.extend(argument.upper() for _name, argument in commands)
            fault = self._fault
            if fault is None:
                return None
            for name, argument in commands:
                if (fault.command is None or name == fault.command) and (
                        fault.argument is None or argument == fault.argument):
                    if fault.skip:
                        fault.skip -= 1
                        continue
                    self._fault = None
                    return fault
            return None

    def _relay(self, client: socket.socket, upstream: socket.socket) -> None:
        pair = (client, upstream)
        with self._lock:
            self._pairs.add(pair)
        parser = _RequestParser()
        stalled = False
        held: _Fault | None = None
        kept_back = bytearray()
        try:
            client.setblocking(True)
            upstream.setblocking(True)
            while not self._stopping.is_set():
                if held is not None and held.release.is_set():
                    client.sendall(kept_back)
                    held, kept_back = None, bytearray()
                readable, _, _ = select.select([client, upstream], [], [], _TICK)
                for sock in readable:
                    try:
                        data = sock.recv(65536)
                    except OSError:
                        data = b""
                    if not data:
                        return
                    if sock is upstream:
                        if held is not None:
                            kept_back += data
                        elif not stalled:
                            client.sendall(data)
                        continue
                    fault = self._take_fault(parser.feed(data))
                    upstream.sendall(data)
                    if fault is None:
                        continue
                    if fault.kind == "stall":
                        stalled = True
                        fault.fired.set()
                        continue
                    if fault.kind == "hold":
                        held = fault
                        fault.fired.set()
                        continue
                    # drop: wait for the server's reply (the command ran), then cut both sides. No deadline:
                    # a cut 2 s after sending, before a loaded server had read the command, reset the
                    # connection, the server never ran it, and the test saw a push that was never written.
                    while not select.select([upstream], [], [], _TICK)[0]:
                        if self._stopping.is_set():
                            return
                    fault.fired.set()
                    return
        except OSError:
            return
        finally:
            with self._lock:
                self._pairs.discard(pair)
            for sock in pair:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
